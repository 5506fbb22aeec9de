# JAX: a jitted training step of a small MLP. Clean.
import jax
import jax.numpy as jnp

key = jax.random.PRNGKey(0)
k1, k2, k3 = jax.random.split(key, 3)
params = {"w1": jax.random.normal(k1, (256, 512)) * 0.05, "w2": jax.random.normal(k2, (512, 10)) * 0.05}
x = jax.random.normal(k3, (128, 256))
y = jax.nn.one_hot(jnp.arange(128) % 10, 10)


def loss(p, x, y):
    h = jnp.tanh(x @ p["w1"])
    return jnp.mean((h @ p["w2"] - y) ** 2)


@jax.jit
def step(p, x, y):
    grads = jax.grad(loss)(p, x, y)
    return jax.tree.map(lambda a, g: a - 0.05 * g, p, grads)


for _ in range(50):
    params = step(params, x, y)
print(f"jax_train: loss {float(loss(params, x, y)):.4f}")
