# Needs Nx (NX_PATH or Hex); without it a placeholder reports the suite as
# excluded (test_helper.exs excludes :nx).
if Code.ensure_loaded?(Nx) do
  defmodule Nx.Vulkan.NxDoctestTest do
    @moduledoc """
    The Nx conformance suite: Nx's own doctests (`Nx`, `Nx.Constants`,
    `Nx.Random`) run with `Nx.Vulkan.Backend` as the default backend.

    Every exclusion is listed with its reason. Host fallbacks are allowed
    here (operations and types without kernels compute on the host); the
    results must still match Nx's examples to the printed digit.
    """
    use ExUnit.Case, async: false
    @moduletag :nx

    # Precision: the device's f32 transcendental functions are GLSL's
    # (exp, log, atan), accurate to a few ulps rather than correctly rounded,
    # so the last printed digit of these examples differs.
    @precision [
      # exp(1) is 1 ulp away (2.718282 vs 2.7182817)
      exp: 1,
      # 1 / (1 + exp(-1)) is 1 ulp away
      sigmoid: 1,
      # atan2(1, 2) differs in the 6th digit
      atan2: 2,
      # tanh(2), tanh(3) are 1 ulp away
      tanh: 1,
      # cos(2) is 1 ulp away
      cos: 1,
      # log(sum(exp(x - max))) is 1 ulp away in some rows
      logsumexp: 2
    ]

    # Precision, Nx.Random: gumbel is -log(-log(u)), 1 ulp away.
    @random_precision [gumbel: 2]

    setup_all do
      previous = Application.get_env(:nx_vulkan, :add_backend_on_inspect)
      Application.put_env(:nx_vulkan, :add_backend_on_inspect, false)

      on_exit(fn ->
        if previous == nil,
          do: Application.delete_env(:nx_vulkan, :add_backend_on_inspect),
          else: Application.put_env(:nx_vulkan, :add_backend_on_inspect, previous)
      end)

      :ok
    end

    setup do
      Nx.default_backend(Nx.Vulkan.Backend)
      :ok
    end

    doctest Nx, except: @precision
    doctest Nx.Constants
    doctest Nx.Random, except: @random_precision
  end
else
  defmodule Nx.Vulkan.NxDoctestTest do
    use ExUnit.Case
    @moduletag :nx

    test "Nx conformance doctests need Nx"
  end
end
