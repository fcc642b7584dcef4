"""Base priority policies: each orders the queue by a key, lowest first."""

from rltuned.policies.base import Policy, rank
from rltuned.policies.registry import POLICIES, make_policy

__all__ = ["POLICIES", "Policy", "make_policy", "rank"]
