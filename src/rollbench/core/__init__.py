"""The contracts and pure functions every stage shares: types, the spec, the plan, the registry, identities, an episode's record and success rule."""
