"""Environment instances across the rounds of one dynamic-sampling batch.

TRL 1.16 keeps a pool of environment instances per environment name and, for every batch, hands out the first
instances of each pool in order, resetting them with the batch's rows. Dynamic sampling generates several rounds
per batch: a row kept from an earlier round still needs its environment (reward functions and logging read its
state), so each round is given only the instances no kept row holds. The pool grows only by what a round needs
beyond the free instances, and every instance is reused by later batches.
"""

from __future__ import annotations


def free_instances(pool: dict, held: list) -> dict:
    """`pool` (`{name: [instance, ...]}`) without the instances in `held`, as new lists TRL may append to."""
    held_ids = {id(instance) for instance in held}
    return {
        name: [instance for instance in instances if id(instance) not in held_ids] for name, instances in pool.items()
    }


def merge_instances(pool: dict, free: dict) -> dict:
    """`pool` with the instances TRL created in `free` (the lists `free_instances` gave it) appended."""
    merged = {}
    for name, instances in pool.items():
        known = {id(instance) for instance in instances}
        created = [item for item in free.get(name, []) if id(item) not in known and item is not _STAND_IN]
        merged[name] = instances + created
    return merged


def stand_ins(pool: dict, num_rows: int) -> dict:
    """A pool of as many stand-ins as rows, for each environment of `pool`."""
    return {name: [_STAND_IN] * num_rows for name in pool}


class EnvironmentStandIn:
    """Stands for an environment when TRL sets up a batch whose rows were already rolled out in their own
    environments: resetting it changes nothing."""

    def reset(self, **kwargs) -> None:
        return None


_STAND_IN = EnvironmentStandIn()
