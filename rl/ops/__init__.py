"""The pure maths the algorithms share: losses, advantage estimators, Q-value aggregates, action distributions."""
