"""The parties' network identity, shared by the secure computations (``privsdr.secure``) and record linkage
(``privsdr.linkage``): their public addresses (``addresses``: one ``host:port`` each, checked) and their
certificates (``certificates``: one CA, a key and certificate per party, verified TLS contexts). No privacy code."""
