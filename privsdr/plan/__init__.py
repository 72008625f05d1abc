"""The plan graph: release nodes, allocation of a budget to noise, preflight and execution."""
from .execute import NoiseTicket, Release, Run, execute, seed_policy
from .graph import CalibratedPlan, Node, Partition, Plan

__all__ = ["CalibratedPlan", "Node", "NoiseTicket", "Partition", "Plan", "Release", "Run", "execute", "seed_policy"]
