"""The `code` reward's judge on other machines: `trl-ext sandbox serve` (`app`), the reward's client of such
servers (`client`, `CodeReward(executor=...)`), and what they say to each other (`protocol`)."""
