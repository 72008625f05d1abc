"""The parties' network identity, shared by the secure computations (``privsdr.secure``) and record linkage
(``privsdr.linkage``), and the mailbox protocols' network transport (``privsdr.parties.transport``): their public
addresses (``addresses``: one ``host:port`` each, checked), the versioned frames of their channels (``frames``) and their
certificates (``certificates``: one CA, a key and certificate per party, verified TLS contexts). No privacy code."""
