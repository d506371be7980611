"""Training: rollouts, rewards, advantages, the OpenRLHF bridge, the embedded GRPO trainer, curriculum, SFT."""
