"""`trl-ext` command line: `plot` a run's curves, `eval` pass@k of a model, list the registered `rewards`, show
which code `sandbox` backend this machine uses, and `sandbox serve` the code judge to other machines."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence


def _plot(args: argparse.Namespace) -> int:
    from .plotting import plot_training_curves

    path, panels = plot_training_curves(args.output_dir, output=args.output, title=args.title)
    print(f"Wrote {path} ({', '.join(panels)})")
    return 0


def _argument_names(line: str) -> list[str]:
    """`["rel_tol", "abs_tol"]` for a docstring line `rel_tol, abs_tol: ...`; empty for any other line."""
    head, colon, _ = line.strip().partition(": ")
    names = [name.strip() for name in head.split(",")]
    return names if colon and all(name.isidentifier() for name in names) else []


def _argument_docs(doc: str | None) -> dict[str, str]:
    """`{argument: description}` from the `Parameters:` / `Args:` section of a reward's docstring."""
    lines = (doc or "").splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() in ("Parameters:", "Args:")), None)
    docs: dict[str, str] = {}
    indent, names = None, []
    for line in lines[start + 1 :] if start is not None else []:
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        if indent is not None and depth < indent:
            break  # the section ended
        if (indent is None or depth == indent) and _argument_names(line):
            indent, names = depth, _argument_names(line)
            docs.update(dict.fromkeys(names, line.strip().partition(": ")[2].strip()))
        else:
            for name in names:
                docs[name] += " " + line.strip()
    return docs


def _reward_arguments(name: str) -> int:
    import inspect

    from .rewards.registry import reward_entry

    try:
        entry = reward_entry(name)
    except KeyError as error:
        print(error.args[0], file=sys.stderr)
        return 2
    aliases = f" (alias {', '.join(entry.aliases)})" if entry.aliases else ""
    print(f"{entry.name}{aliases}: {entry.description}\n\nArguments (`{entry.name}:argument=value,...` in a spec):")
    docs = _argument_docs(entry.factory.__doc__)
    for parameter in inspect.signature(entry.factory).parameters.values():
        if parameter.name not in entry.parameters:
            continue
        default = "required" if parameter.default is inspect.Parameter.empty else f"default {parameter.default!r}"
        print(f"  {parameter.name} ({default})")
        if docs.get(parameter.name):
            print(f"      {docs[parameter.name]}")
    return 0


def _rewards(args: argparse.Namespace) -> int:
    from .rewards import list_rewards

    if args.name:
        return _reward_arguments(args.name)
    rewards = list_rewards()
    width = max(map(len, rewards), default=0)
    for name, description in rewards.items():
        print(f"{name:<{width}}  {description}")
    return 0


def _sandbox(args: argparse.Namespace) -> int:
    from .sandbox import Sandbox, SandboxUnavailableError, bwrap_binaries, cpp_compiler

    found = bwrap_binaries()
    print("bubblewrap found: " + (", ".join(f"{path} ({origin})" for path, origin in found) or "none"))
    print(f"C++ compiler: {cpp_compiler() or 'none (apt-get install g++ for language=cpp)'}")
    try:
        sandbox = Sandbox(isolation=args.isolation)
    except SandboxUnavailableError as error:
        print(f"isolation: unavailable\n{error}")
        return 1
    print(f"isolation: {sandbox.describe()}")
    result = sandbox.run_python("check.py", files={"check.py": "import os\nprint(os.getuid())"})
    print(f"check run: {'ok' if result.ok else 'FAILED'} (uid {result.stdout.decode().strip() or '?'} in the sandbox, "
          f"{result.wall_time * 1000:.0f} ms)")
    return 0 if result.ok else 1


def _serve(args: argparse.Namespace) -> int:
    import os

    from .judge_service.app import ServeOptions, serve
    from .judge_service.client import TOKEN_VARIABLE

    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        print("trl-ext sandbox serve needs its server stack: pip install 'trl-ext[serve]'", file=sys.stderr)
        return 2

    if args.token_file:
        with open(args.token_file, encoding="utf-8") as file:
            token = file.read().strip()
    else:
        token = os.environ.get(TOKEN_VARIABLE, "").strip()
    if len(token) < 16:
        print(f"trl-ext sandbox serve needs a shared secret of at least 16 characters: set {TOKEN_VARIABLE} (e.g. "
              f"`export {TOKEN_VARIABLE}=$(openssl rand -hex 32)`) or pass --token-file; clients send the same one.",
              file=sys.stderr)
        return 2
    if args.workers < 1 or args.max_queue < 0:
        print("--workers must be at least 1 and --max-queue at least 0.", file=sys.stderr)
        return 2
    options = ServeOptions(token=token, workers=args.workers, isolation=args.serve_isolation,
                           max_queue=args.max_queue, max_request_bytes=int(args.max_request_mb * (1 << 20)),
                           max_timeout=args.max_timeout, max_memory_mb=args.max_memory_mb)
    serve(options, host=args.host, port=args.port)
    return 0


def _eval(args: argparse.Namespace) -> int:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .evaluation import evaluate_pass_at_k, parse_ks
    from .rewards import get_reward
    from .rewards.registry import check_reward_columns, first_rows, parse_reward_spec
    from .tasks import load_raw_dataset, prepare_prompts, resolve_model_path

    ks = parse_ks(args.k, args.n)  # fail on a bad k before loading anything
    name, reward_kwargs, _ = parse_reward_spec(args.reward)
    reward = get_reward(name, **reward_kwargs)

    splits = load_raw_dataset(args.dataset, args.dataset_config)
    if args.split not in splits:
        raise SystemExit(f"--split {args.split!r} is not in {args.dataset}; it has {list(splits)}.")
    solution_column = args.solution_column
    if solution_column is None and "solution" in splits[args.split].column_names:
        solution_column = "solution"
    dataset = prepare_prompts(
        splits[args.split],
        prompt_column=args.prompt_column,
        solution_column=solution_column,
        prompt_template=args.prompt_template,
        system_prompt=args.system_prompt,
        conversational=args.conversational,
    )
    if args.num_prompts is not None:
        dataset = dataset.select(range(min(args.num_prompts, len(dataset))))
    # The reward reads the dataset's columns (the code reward finds its test format): checked before any loading.
    check_reward_columns([reward], dataset.column_names, first_rows(dataset))

    model_path = resolve_model_path(args.model)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = args.dtype if args.dtype == "auto" else getattr(torch, args.dtype)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype).to(device)

    result = evaluate_pass_at_k(
        model,
        tokenizer,
        dataset,
        reward,
        num_samples=args.n,
        ks=ks,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        batch_size=args.batch_size,
        correct_threshold=args.correct_threshold,
        seed=args.seed,
    )
    print(f"{args.model} on {args.dataset} [{args.split}], reward {args.reward}: {result.summary()}")
    if args.output:
        report = {
            "model": args.model,
            "dataset": args.dataset,
            "split": args.split,
            "reward": args.reward,
            "n": args.n,
            **{f"pass@{k}": value for k, value in result.pass_at_k.items()},
            "mean_reward": result.mean_reward,
            "num_correct": result.num_correct,
        }
        with open(args.output, "w") as file:
            json.dump(report, file, indent=2)
        print(f"Wrote {args.output}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trl-ext", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    plot = commands.add_parser("plot", help="Draw a run's training curves into a PNG.")
    plot.add_argument("output_dir", help="The run's output_dir (or a checkpoint folder, or a trainer_state.json).")
    plot.add_argument("--output", help="PNG path (default: OUTPUT_DIR/training_curves.png).")
    plot.add_argument("--title", help="Figure title (default: the run folder's name).")
    plot.set_defaults(handler=_plot)

    rewards = commands.add_parser(
        "rewards", help="List the registered reward functions, or show one reward's arguments (`rewards code`)."
    )
    rewards.add_argument("name", nargs="?", help="A reward name or alias: print its arguments and defaults.")
    rewards.set_defaults(handler=_rewards)

    sandbox = commands.add_parser(
        "sandbox", help="Show which backend isolates the code sandbox here (exit status 1 if none can)."
    )
    sandbox.add_argument(
        "--isolation", default="auto", choices=["auto", "bwrap", "unshare", "none"], help="Backend to check."
    )
    sandbox.set_defaults(handler=_sandbox)
    serve = sandbox.add_subparsers(dest="sandbox_command").add_parser(
        "serve", help="Serve the `code` reward's judge over HTTP to trainers on other machines "
        "(`CodeReward(executor=URL)`); see docs/rewards/judge-servers.md.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="Address to listen on (default: loopback only).")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--token-file", help="File holding the shared secret (default: $TRL_EXT_JUDGE_TOKEN).")
    serve.add_argument("--workers", type=int, default=1, help="Programs judged at once (about one per core).")
    serve.add_argument("--max-queue", type=int, default=64, help="Jobs that may wait beyond those (then 503).")
    serve.add_argument("--max-request-mb", type=float, default=16.0, help="Largest request body (then 413).")
    serve.add_argument("--max-timeout", type=float, default=60.0, help="Largest per-test timeout a job may ask.")
    serve.add_argument("--max-memory-mb", type=int, default=4096, help="Largest memory_mb a job may ask.")
    serve.add_argument("--isolation", dest="serve_isolation", default="auto", choices=["auto", "bwrap"],
                       help="Sandbox backend (only isolating ones: the programs come from elsewhere).")
    serve.set_defaults(handler=_serve)

    evaluate = commands.add_parser("eval", help="pass@k of a model on a dataset, scored by a registry reward.")
    evaluate.add_argument("--model", required=True, help="Hub name, local folder, or builtin:tiny-arithmetic.")
    evaluate.add_argument(
        "--dataset",
        required=True,
        help="Hub name, local file/folder (json, jsonl, parquet, csv, save_to_disk) or builtin:arithmetic.",
    )
    evaluate.add_argument("--dataset-config", help="Hub dataset configuration name (e.g. 'main' for openai/gsm8k).")
    evaluate.add_argument("--split", default="test", help="Split to evaluate (default: test).")
    evaluate.add_argument("--num-prompts", type=int, help="Evaluate only the first N prompts.")
    evaluate.add_argument("--prompt-column", default="prompt")
    evaluate.add_argument(
        "--solution-column",
        help="Reference answers; dotted for nested fields (default: `solution` if the dataset has it; code datasets "
        "need none, the `code` reward reads their tests).",
    )
    evaluate.add_argument(
        "--prompt-template", help="Build prompts from columns, e.g. '{question}\\nAnswer in \\boxed{}.'."
    )
    evaluate.add_argument("--system-prompt", help="Add a system message (makes prompts conversational).")
    evaluate.add_argument(
        "--conversational", action="store_true", help="Send prompts as user messages through the chat template."
    )
    evaluate.add_argument(
        "--reward",
        default="math",
        help="Registry reward spec, e.g. 'math' or 'exact_match:normalize=false' (see `trl-ext rewards`).",
    )
    evaluate.add_argument("--n", type=int, default=16, help="Samples per prompt.")
    evaluate.add_argument("--k", default="1", help="Comma-separated k values, each <= n (e.g. 1,4,16).")
    evaluate.add_argument("--max-new-tokens", type=int, default=512)
    evaluate.add_argument("--temperature", type=float, default=1.0, help="0 decodes greedily.")
    evaluate.add_argument("--top-p", type=float, default=1.0)
    evaluate.add_argument("--batch-size", type=int, default=64, help="Sequences per generate call.")
    evaluate.add_argument(
        "--correct-threshold", type=float, default=0.0, help="A sample is correct when its reward exceeds this."
    )
    evaluate.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
    evaluate.add_argument("--device", help="Default: cuda if available, else cpu.")
    evaluate.add_argument("--seed", type=int, default=0)
    evaluate.add_argument("--output", help="Also write the results as JSON to this file.")
    evaluate.set_defaults(handler=_eval)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
