defmodule Nx.Vulkan.TestData do
  @moduledoc false
  # Random tensors on the Vulkan backend for the Nx-level suites (loaded by
  # test_helper.exs only where Nx is available).

  @doc "Uniform values in [lo, hi) of `type` and `shape` from `seed`, on the Vulkan backend."
  def uniform(seed, shape, type, lo, hi) do
    {t, _} = Nx.Random.uniform(Nx.Random.key(seed), lo, hi, shape: shape, type: type)
    Nx.backend_transfer(t, Nx.Vulkan.Backend)
  end
end
