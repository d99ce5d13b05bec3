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

    # Precision: f32 atan2 is the driver's (GLSL atan), a few ulp from the
    # correctly rounded value; the 6th printed digit of these differs.
    # (exp, log, sin, cos, tanh and sigmoid are evaluated in double and
    # match to the last digit.)
    @precision [atan2: 2]

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
      if System.get_env("NXV_RAISE"), do: Process.put(:nx_vulkan_host_fallback, :raise)
      :ok
    end

    doctest Nx, except: @precision
    doctest Nx.Constants
    doctest Nx.Random
  end
else
  defmodule Nx.Vulkan.NxDoctestTest do
    use ExUnit.Case
    @moduletag :nx

    test "Nx conformance doctests need Nx"
  end
end
