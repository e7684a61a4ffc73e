"""Rule-based verifiable rewards."""

from .length import SoftOverlongPunishment, soft_overlong_penalty

__all__ = ["SoftOverlongPunishment", "soft_overlong_penalty"]
