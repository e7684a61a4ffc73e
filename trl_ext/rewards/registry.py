"""Rewards by name: a decorator registry and the spec parser YAML recipes use.

    @register_reward("boxed", aliases=("last_boxed",), description="Last \\boxed{} answer equals the reference.")
    class BoxedReward(Reward): ...

    reward_funcs, reward_weights = build_reward_funcs(["math", {"name": "soft_overlong", "weight": 0.5,
                                                      "kwargs": {"max_length": 1024, "buffer_length": 256}}])

A registered object is a class or a factory function; its keyword arguments are the reward's arguments and
are checked against its signature before it is called, so a typo fails at construction with the valid names.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "AsyncReward",
    "RewardEntry",
    "build_reward_funcs",
    "call_reward",
    "check_reward_columns",
    "reward_columns",
    "get_reward",
    "list_rewards",
    "parse_reward_spec",
    "register_reward",
    "reward_entry",
]


@dataclass(frozen=True)
class RewardEntry:
    """One registered reward: its canonical name, how to build it, and what it does."""

    name: str
    factory: Callable[..., Callable]
    description: str
    aliases: tuple[str, ...] = ()
    # Pooled rewards do CPU-heavy work in worker processes; by default they are wrapped as async callables so
    # TRL runs several of them at once (see `AsyncReward`).
    pooled: bool = False
    parameters: tuple[str, ...] = field(default=())


_REGISTRY: dict[str, RewardEntry] = {}
_ALIASES: dict[str, str] = {}


def _first_line(doc: str | None) -> str:
    for line in (doc or "").strip().splitlines():
        if line.strip():
            return line.strip()
    return ""


def register_reward(
    name: str, *, aliases: Sequence[str] = (), description: str | None = None, pooled: bool = False
) -> Callable:
    """Register a reward class or factory under `name` (and `aliases`).

    `description` is the one-line summary `list_rewards()` shows; it defaults to the first line of the
    docstring. `pooled=True` marks rewards whose work runs in the verification process pool, which
    `get_reward` exposes as async callables by default.
    """

    def decorator(factory: Callable) -> Callable:
        for key in (name, *aliases):
            if key in _REGISTRY or key in _ALIASES:
                raise ValueError(f"A reward named {key!r} is already registered.")
        summary = description or _first_line(factory.__doc__)
        if not summary:
            raise ValueError(f"Reward {name!r} needs a description (argument or docstring).")
        signature = inspect.signature(factory)
        parameters = tuple(
            p.name
            for p in signature.parameters.values()
            if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        )
        _REGISTRY[name] = RewardEntry(name, factory, summary, tuple(aliases), pooled, parameters)
        for alias in aliases:
            _ALIASES[alias] = name
        return factory

    return decorator


def _ensure_builtin_rewards() -> None:
    # The verifier modules register themselves on import; importing the package imports them all.
    import trl_ext.rewards  # noqa: F401


def reward_entry(name: str) -> RewardEntry:
    """The registry entry for a name or alias; raises `KeyError` listing the valid names."""
    _ensure_builtin_rewards()
    canonical = _ALIASES.get(name, name)
    if canonical not in _REGISTRY:
        raise KeyError(
            f"Unknown reward {name!r}. Registered rewards: {sorted(_REGISTRY)}; aliases: "
            f"{ {alias: target for alias, target in sorted(_ALIASES.items())} }."
        )
    return _REGISTRY[canonical]


def list_rewards() -> dict[str, str]:
    """Registered reward names (canonical, sorted) mapped to their one-line description."""
    _ensure_builtin_rewards()
    return {name: _REGISTRY[name].description for name in sorted(_REGISTRY)}


class AsyncReward:
    """Async view of a synchronous reward, so TRL gathers it with its other async rewards.

    TRL (`GRPOTrainer._calculate_rewards`, also RLOO) runs synchronous reward functions one after the other
    in the training thread, and async ones together with `asyncio.gather` on its event-loop thread. The wrapped
    reward runs in a worker thread (`asyncio.to_thread`), where it mostly waits on the process pool, so two
    pooled rewards (say `math` and `code`) verify at the same time. Pickles as the wrapped reward does.
    """

    def __init__(self, reward: Callable):
        self.reward = reward
        self.__name__ = getattr(reward, "__name__", type(reward).__name__)

    async def __call__(self, prompts=None, completions=None, completion_ids=None, **columns) -> list[float | None]:
        return await asyncio.to_thread(
            self.reward, prompts=prompts, completions=completions, completion_ids=completion_ids, **columns
        )

    def __repr__(self) -> str:
        return f"AsyncReward({self.reward!r})"


def get_reward(name: str, *, asynchronous: bool | None = None, **kwargs: Any) -> Callable:
    """Build the reward registered as `name` (or an alias) with its arguments `kwargs`.

    Returns a picklable callable with TRL's reward signature whose `__name__` is the canonical registered name.
    `asynchronous=None` picks the reward's default: pooled rewards come wrapped in `AsyncReward` (TRL awaits
    them and overlaps them), others are plain callables. Pass `asynchronous=False` to call a pooled reward
    directly, or use `call_reward`, which handles both. Unknown arguments raise `TypeError` listing the valid
    ones.
    """
    entry = reward_entry(name)
    try:
        inspect.signature(entry.factory).bind(**kwargs)
    except TypeError as error:
        raise TypeError(
            f"Reward {entry.name!r}: invalid arguments {sorted(kwargs)} ({error}). "
            f"Valid arguments: {list(entry.parameters)}."
        ) from None
    reward = entry.factory(**kwargs)
    try:
        reward.__name__ = entry.name
    except (AttributeError, TypeError):  # a plain function cannot be renamed per instance; keep it as is
        pass
    if asynchronous is None:
        asynchronous = entry.pooled
    if asynchronous and not inspect.iscoroutinefunction(type(reward).__call__):
        reward = AsyncReward(reward)
    return reward


def call_reward(reward: Callable, prompts=None, completions=None, completion_ids=None, **columns) -> list[float | None]:
    """Call any reward synchronously, async or not (outside TRL: evaluation scripts, tests, notebooks)."""
    result = reward(prompts=prompts, completions=completions, completion_ids=completion_ids, **columns)
    if not inspect.isawaitable(result):
        return result
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await(result))
    # Inside a running event loop (a notebook) `asyncio.run` is refused; run the coroutine on its own loop.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as executor:
        return executor.submit(asyncio.run, _await(result)).result()


async def _await(awaitable):
    return await awaitable


def _split_top_level(text: str, separator: str = ",") -> list[str]:
    """Split on `separator` outside brackets and quotes, so `tags=[a,b]` and `pattern='x{1,3}'` stay whole."""
    parts, depth, quote, start = [], 0, None, 0
    for index, char in enumerate(text):
        if quote:
            if char == quote and text[index - 1] != "\\":
                quote = None
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == separator and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


def _parse_value(text: str) -> Any:
    """A spec argument value: a Python/YAML-style literal (number, boolean, none, list, quoted string), else
    the raw string."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null", "~"):
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        pass
    if text.startswith("[") and text.endswith("]"):  # a list of bare words: [reasoning, answer]
        return [_parse_value(item) for item in _split_top_level(text[1:-1])]
    return text


def parse_reward_spec(spec: str | Mapping[str, Any]) -> tuple[str, dict[str, Any], float]:
    """`(name, kwargs, weight)` from a spec: `"name"`, `"name:arg=value,arg2=value"`, or `{name, weight, kwargs}`."""
    if isinstance(spec, str):
        name, _, arguments = spec.partition(":")
        kwargs = {}
        for item in _split_top_level(arguments):
            key, equals, value = item.partition("=")
            if not equals or not key.strip():
                raise ValueError(f"Reward spec {spec!r}: expected `name:arg=value,arg2=value`, got {item!r}.")
            kwargs[key.strip()] = _parse_value(value.strip())
        return name.strip(), kwargs, 1.0
    if isinstance(spec, Mapping):
        unknown = set(spec) - {"name", "weight", "kwargs"}
        if unknown or "name" not in spec:
            raise ValueError(
                f"Reward spec {dict(spec)!r}: a mapping needs `name` and may have `weight` and `kwargs`; "
                f"unexpected keys {sorted(unknown)}."
            )
        kwargs = spec.get("kwargs") or {}
        if not isinstance(kwargs, Mapping):
            raise ValueError(f"Reward spec {dict(spec)!r}: `kwargs` must be a mapping, got {type(kwargs).__name__}.")
        weight = spec.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)):
            raise ValueError(f"Reward spec {dict(spec)!r}: `weight` must be a number, got {weight!r}.")
        return str(spec["name"]), dict(kwargs), float(weight)
    raise TypeError(f"A reward spec is a string or a mapping, got {type(spec).__name__}: {spec!r}.")


def build_reward_funcs(
    specs: str | Mapping[str, Any] | Sequence[str | Mapping[str, Any]], *, asynchronous: bool | None = None
) -> tuple[list[Callable], list[float]]:
    """`(reward_funcs, reward_weights)` for a TRL trainer from reward specs, e.g. a recipe's YAML list.

    Every reward is built (and so validated) here, before training starts. When one name appears twice
    (say two `regex_format` with different patterns) the later ones get `__name__` `<name>_2`, `<name>_3`, ...
    so TRL's per-reward metrics stay apart. `asynchronous` is passed to `get_reward`.
    """
    if isinstance(specs, (str, Mapping)):
        specs = [specs]
    reward_funcs, reward_weights, seen = [], [], {}
    for spec in specs:
        name, kwargs, weight = parse_reward_spec(spec)
        reward = get_reward(name, asynchronous=asynchronous, **kwargs)
        base = reward.__name__
        seen[base] = seen.get(base, 0) + 1
        if seen[base] > 1:
            reward.__name__ = f"{base}_{seen[base]}"
            if isinstance(reward, AsyncReward):
                reward.reward.__name__ = reward.__name__
        reward_funcs.append(reward)
        reward_weights.append(weight)
    return reward_funcs, reward_weights


def reward_columns(reward: Callable) -> dict[str, str]:
    """The dataset columns a reward reads, as `{argument: column}` (its `*_column` arguments that are set)."""
    while isinstance(reward, AsyncReward):
        reward = reward.reward
    return {
        argument: column
        for argument, column in vars(reward).items()
        if argument.endswith("_column") and isinstance(column, str)
    } if hasattr(reward, "__dict__") else {}


def first_rows(dataset: Any, count: int = 8) -> list[Mapping[str, Any]]:
    """The first `count` rows of a map-style dataset (none of a stream: reading it would consume it)."""
    try:
        return [dataset[index] for index in range(min(count, len(dataset)))]
    except (TypeError, KeyError, IndexError, NotImplementedError):
        return []


def check_reward_columns(
    reward_funcs: Sequence[Callable], column_names: Sequence[str], rows: Sequence[Mapping[str, Any]] = ()
) -> None:
    """Raise before training if a reward cannot read the dataset: a column it reads is missing (naming the
    reward, the column, the argument that chose it and the columns there are), or, for a reward that checks its
    own schema (`dataset_problems(column_names, rows)`, as `code` does with its test formats), what it reports.
    `column_names` is e.g. `train_dataset.column_names`, `rows` its first rows (`first_rows`)."""
    available = set(column_names)
    problems = []
    for reward in reward_funcs:
        name = getattr(reward, "__name__", type(reward).__name__)
        inner = reward
        while isinstance(inner, AsyncReward):
            inner = inner.reward
        if hasattr(inner, "dataset_problems"):
            problems += [f"reward {name!r} {problem}" for problem in inner.dataset_problems(column_names, rows)]
            continue
        for argument, column in reward_columns(reward).items():
            if column not in available:
                problems.append(f"reward {name!r} reads column {column!r} (argument {argument})")
    if problems:
        raise ValueError(
            "The dataset lacks columns the rewards need: " + "; ".join(problems)
            + f". Dataset columns: {sorted(available)}. Rename the column or set the reward's argument,"
            " e.g. `math:reference_column=answer`."
        )
