# The Hamiltonian Monte Carlo step of bench/sampler.exs and
# bench/step_timeline.exs, in plain defn: a standard normal target,
# momentum from Nx.Random.normal, `steps` leapfrog steps in a `while`
# loop, and the Metropolis test with Nx.Random.uniform. Loaded with
# Code.require_file/2.
defmodule NxBench.Sampler do
  @moduledoc false
  import Nx.Defn

  defn(logp(q), do: -0.5 * Nx.sum(q * q))

  defn(grad_logp(q), do: grad(q, &logp/1))

  defn leapfrog(q, p, eps, opts \\ []) do
    steps = opts[:steps]
    p = p + 0.5 * eps * grad_logp(q)

    {_, q, p, _} =
      while {i = 1, q, p, eps}, i < steps do
        q = q + eps * p
        p = p + eps * grad_logp(q)
        {i + 1, q, p, eps}
      end

    q = q + eps * p
    p = p + 0.5 * eps * grad_logp(q)
    {q, p}
  end

  defn hmc_step(q, key, eps, opts \\ []) do
    {p, key} = Nx.Random.normal(key, shape: Nx.shape(q), type: Nx.type(q))
    {qn, pn} = leapfrog(q, p, eps, steps: opts[:steps])
    h0 = -logp(q) + 0.5 * Nx.sum(p * p)
    h1 = -logp(qn) + 0.5 * Nx.sum(pn * pn)
    {u, key} = Nx.Random.uniform(key, type: Nx.type(q))
    accept = Nx.log(u) < h0 - h1
    {Nx.select(accept, qn, q), key, accept}
  end
end
