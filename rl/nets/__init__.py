"""Networks for RL agents.

Bodies turn observations into features: `mlp` (vectors), `cnn` (images) and
`transformer` (windows of an episode's last steps, RLTask.context_length);
a new body goes in a module of its own beside them. `heads` puts the policy,
value, policy-and-value and Q-value heads on a body, with an optional
`normalizer` in front. `variables` initialises models and copies shared
layers between them.

Shapes. Every model consumes observations shaped [B, L, *obs_shape] (batch of
slices of L timesteps) and returns per-timestep outputs shaped [B, L, ...].

Gin. The linen Module classes are plain dataclasses; gin is only put on the
factory functions (`MLP`, `AtariCnnBody`, `MinAtarCnnBody`, `TransformerDecoder`, `Normalize`,
`Policy`, `Value`, `PolicyAndValue`, `Quality`). Gin rewriting a dataclass'
__init__ interferes with linen's own dataclass transform and module cloning,
whereas a factory is an ordinary function gin handles well. `body` and
`normalizer` arguments are factories too (gin passes `@MLP`, `@AtariCnnBody`,
`@Normalize`), so every call builds a fresh, unbound module.
"""
