# Needs Nx (NX_PATH or Hex); without it a placeholder reports the suite as
# excluded (test_helper.exs excludes :nx).
if Code.ensure_loaded?(Nx) do
  defmodule Nx.Vulkan.NxDoctestTest do
    @moduledoc """
    The Nx conformance suite: Nx's own doctests (`Nx`, `Nx.LinAlg`,
    `Nx.Constants`, `Nx.Random`) run with `Nx.Vulkan.Backend` as the
    default backend.

    Every exclusion is listed with its reason. Host fallbacks are allowed
    here (operations and types without kernels compute on the host); the
    results must still match Nx's examples to the printed digit.
    """
    use ExUnit.Case, async: false
    @moduletag :nx

    # Nx.LinAlg examples whose printed results differ: lu pivots as LAPACK
    # does (on the largest element of the updated column, where
    # Nx.BinaryBackend orders the rows by the input's columns first), so
    # some matrices get another P, L and U, as valid (A = P L U with
    # |L| <= 1); solve, through that factorization, rounds a zero to -0.0;
    # the others print f32 results a few ulp apart, each as close to the
    # exact value as Nx's own: cholesky scales a column by the reciprocal
    # of its divisor (within an ulp of the quotient Nx divides by), which
    # the next square root's cancellation magnifies; pinv (and
    # least_squares, through pinv or solve) computes on the device, its SVD
    # included, whose f32 products, QR and Cholesky steps round otherwise
    # than Nx.BinaryBackend's (pinv's second example gets the exact 1.0
    # where Nx prints 0.9999999403953552); matrix_power runs on the host
    # around device products, whose sums round in another order than
    # Nx.BinaryBackend's; qr computes f32 in
    # double and rounds once, so its first example prints the nearest f32
    # to sqrt(2) and 1 / sqrt(2) where Nx's f32 arithmetic is an ulp or two
    # off (its examples run in linalg_test.exs with those values).
    # (pow, atan2 and the transcendentals of f32 are evaluated in double
    # and match to the last digit.)
    @linalg_digits [
      cholesky: 1,
      lu: 2,
      solve: 2,
      least_squares: 2,
      pinv: 2,
      matrix_power: 2,
      qr: 2
    ]

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

    doctest Nx
    doctest Nx.LinAlg, except: @linalg_digits
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
