# A JAX jit function called ROUNDS times. XLA decides how many kernels one call is.
# Usage: jax_jit.py ROUNDS
import json, sys
import jax, jax.numpy as jnp

@jax.jit
def step(x):
    return jnp.sin(x) * 0.5 + jnp.cos(x) * 0.25

rounds = int(sys.argv[1])
x = jnp.ones((1 << 20,), dtype=jnp.float32)
for _ in range(rounds):
    x = step(x)
x.block_until_ready()
print("jax_jit:", rounds, "rounds, checksum", float(jnp.sum(x)))
print("EXPECT", json.dumps({"launch_per_round": "integer"}))
