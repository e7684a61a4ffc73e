"""The `code` reward's judge on other machines: `trl-ext sandbox serve` (`app`), the reward's client of such
servers (`client`, `CodeReward(executor=...)`), what they say to each other (`protocol`), and existing execution
services (SandboxFusion, Piston) as executors for stdin/stdout rows (`engines`). See
docs/rewards/judge-servers.md."""
