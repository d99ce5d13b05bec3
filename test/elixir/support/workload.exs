defmodule Nx.Vulkan.Workload do
  @moduledoc """
  Workloads of the reliability tests and their longer versions in
  `bench/` (`bench/load.exs`, `bench/soak.exs`). NIF-level: they need no
  Nx.

  `mixed/3` runs a seeded random sequence of ops on one s32 vector and
  checks every result exactly against a model computed in Elixir.
  `step/2` is one fixed iteration of the soak loop.
  """

  alias Nx.Vulkan.NIF
  import Bitwise

  @n 37
  @mask 0xFFFF

  defp s32(list), do: for(x <- list, into: <<>>, do: <<x::signed-32-native>>)
  defp to_s32(bin), do: for(<<x::signed-32-native <- bin>>, do: x)

  @doc """
  Runs `ops` random ops (seeded by `seed`) on device `dev`: elementwise
  binary and unary ops, a reversed (negative stride) read, compare and
  select, an f32 round trip, sums, and matrix products in f32 of values
  small enough to be exact. Downloads and compares the running vector
  every 64 ops and at the end, every sum and product at the end. Returns
  the number of ops queued; raises on the first wrong element.
  """
  @spec mixed(reference, integer, pos_integer) :: non_neg_integer
  def mixed(dev, seed, ops) do
    :rand.seed(:exsss, {seed, seed * 7 + 1, seed * 13 + 2})
    cs = for _ <- 1..@n, do: :rand.uniform(201) - 101
    c = NIF.upload(dev, :s32, s32(cs))
    mask = NIF.fill(dev, :s32, @n, <<@mask::signed-32-native>>)
    ones = NIF.fill(dev, :f32, @n, <<1.0::float-32-native>>)
    xs = for _ <- 1..@n, do: :rand.uniform(2001) - 1001
    x = NIF.upload(dev, :s32, s32(xs))
    env = %{c: c, cs: cs, mask: mask, ones: ones}

    {x, xs, checks, queued} =
      Enum.reduce(1..ops, {x, xs, [], 0}, fn i, {x, xs, checks, queued} ->
        {x, xs, checks, q} = op(:rand.uniform(11), x, xs, checks, env)
        if rem(i, 64) == 0, do: verify!(x, xs, "vector after op #{i}")
        {x, xs, checks, queued + q}
      end)

    verify!(x, xs, "final vector")

    for {t, expected, what} <- checks do
      got =
        case NIF.tensor_info(t) do
          {:s32, 1} -> to_s32(NIF.download(t, 0, 1))
          {:f32, 1} -> for <<v::float-32-native <- NIF.download(t, 0, 1)>>, do: v
        end

      unless got == [expected],
        do: raise("#{what}: expected #{inspect(expected)}, got #{inspect(got)}")
    end

    queued
  end

  defp verify!(x, xs, what) do
    got = to_s32(NIF.download(x, 0, @n))
    unless got == xs, do: raise("#{what}: expected #{inspect(xs)}, got #{inspect(got)}")
  end

  defp bin(op, a, b), do: NIF.binary(op, [@n], a, 0, nil, b, 0, nil)
  defp zip(xs, ys, f), do: Enum.zip_with(xs, ys, f)

  defp op(1, x, xs, ch, e), do: {bin(:add, x, e.c), zip(xs, e.cs, &+/2), ch, 1}
  defp op(2, x, xs, ch, e), do: {bin(:subtract, x, e.c), zip(xs, e.cs, &-/2), ch, 1}

  defp op(3, x, xs, ch, e) do
    y = bin(:bitwise_and, bin(:multiply, x, e.c), e.mask)
    {y, zip(xs, e.cs, &band(&1 * &2, @mask)), ch, 2}
  end

  defp op(4, x, xs, ch, _e),
    do: {NIF.unary(:negate, [@n], x, 0, nil), Enum.map(xs, &(-&1)), ch, 1}

  defp op(5, x, xs, ch, _e), do: {NIF.unary(:abs, [@n], x, 0, nil), Enum.map(xs, &abs/1), ch, 1}
  defp op(6, x, xs, ch, e), do: {bin(:max, x, e.c), zip(xs, e.cs, &max/2), ch, 1}

  defp op(7, x, xs, ch, _e),
    do: {NIF.unary(:copy, [@n], x, @n - 1, [-1]), Enum.reverse(xs), ch, 1}

  defp op(8, x, xs, ch, e) do
    p = NIF.compare(:greater, [@n], x, 0, nil, e.c, 0, nil)
    y = NIF.select([@n], p, 0, nil, x, 0, nil, e.c, 0, nil)
    {y, zip(xs, e.cs, &if(&1 > &2, do: &1, else: &2)), ch, 2}
  end

  defp op(9, x, xs, ch, _e) do
    y = NIF.convert(:s32, [@n], NIF.convert(:f32, [@n], x, 0, nil), 0, nil)
    {y, xs, ch, 2}
  end

  defp op(10, x, xs, ch, _e) do
    s = NIF.reduce(:sum, [@n], x, 0, nil, [0], :s32)
    {x, xs, [{s, Enum.sum(xs), "sum"} | ch], 1}
  end

  defp op(11, x, xs, ch, e) do
    # [1, n] x [n, 1] in f32 of values below 2^16: exact.
    m = bin(:bitwise_and, x, e.mask)
    f = NIF.convert(:f32, [@n], m, 0, nil)
    p = NIF.matmul(1, 1, 1, @n, f, 0, [0, @n, 1], e.ones, 0, [0, 1, 1])
    expected = xs |> Enum.map(&band(&1, @mask)) |> Enum.sum() |> Kernel.*(1.0)
    {x, xs, [{p, expected, "product"} | ch], 3}
  end

  @doc """
  One iteration of the soak loop on `dev` with the inputs of `init/1`: a
  small training-like step (a product, elementwise ops, a reduction, a
  strided read, uploads and a scalar download), 10 device ops. Returns
  the downloaded scalar, which is always `state.expected`.
  """
  @spec step(reference, map) :: float
  def step(dev, state) do
    %{w: w, x: x, k: k} = state
    h = NIF.matmul(1, 16, 16, 16, x, 0, [0, 16, 1], w, 0, [0, 16, 1])
    h = NIF.binary(:max, [256], h, 0, nil, state.zero, 0, [0])
    g = NIF.binary(:multiply, [256], h, 0, nil, k, 0, nil)
    g = NIF.binary(:subtract, [256], g, 0, nil, h, 0, nil)
    t = NIF.unary(:copy, [16, 16], g, 0, [1, 16])
    u = NIF.upload(dev, :f32, state.bytes)
    t = NIF.binary(:add, [256], t, 0, nil, u, 0, nil)
    a = NIF.unary(:abs, [256], t, 0, nil)
    s = NIF.reduce(:sum, [256], a, 0, nil, [0], :f32)
    <<v::float-32-native>> = NIF.download(s, 0, 1)
    v
  end

  @doc "Inputs of `step/2` on `dev`, and the value every step returns."
  @spec init(reference) :: map
  def init(dev) do
    f32 = fn list -> for(v <- list, into: <<>>, do: <<v * 1.0::float-32-native>>) end
    xv = for i <- 0..255, do: rem(i, 5) - 2
    wv = for i <- 0..255, do: rem(i * 3, 7) - 3
    uv = for i <- 0..255, do: rem(i, 3)
    w = NIF.upload(dev, :f32, f32.(wv))
    x = NIF.upload(dev, :f32, f32.(xv))
    k = NIF.fill(dev, :f32, 256, <<2.0::float-32-native>>)
    zero = NIF.fill(dev, :f32, 1, <<0.0::float-32-native>>)
    bytes = f32.(uv)
    # The same step on the host: relu(x w) * 2 - relu(x w) = relu(x w),
    # transposed, plus u, absolute values summed. Small integers: exact.
    rows = Enum.chunk_every(xv, 16)
    cols = wv |> Enum.chunk_every(16) |> Enum.zip_with(& &1)
    h = for r <- rows, c <- cols, do: max(Enum.sum(Enum.zip_with(r, c, &*/2)), 0)
    ht = h |> Enum.chunk_every(16) |> Enum.zip_with(& &1) |> List.flatten()
    expected = ht |> Enum.zip_with(uv, &abs(&1 + &2)) |> Enum.sum() |> Kernel.*(1.0)
    %{w: w, x: x, k: k, zero: zero, bytes: bytes, expected: expected}
  end

  @doc """
  Figures the soak watches: process RSS (kB, from `/proc/self/status`),
  BEAM memory, pool bytes reserved and in use, live pool buffers, staging
  bytes and pipelines of `dev`.
  """
  @spec sample(reference) :: map
  def sample(dev) do
    s = NIF.device_stats(dev)

    rss =
      case File.read("/proc/self/status") do
        {:ok, status} ->
          case Regex.run(~r/VmRSS:\s+(\d+) kB/, status) do
            [_, kb] -> String.to_integer(kb)
            _ -> 0
          end

        _ ->
          0
      end

    %{
      rss_kb: rss,
      beam_bytes: :erlang.memory(:total),
      pool_reserved: s.pool_bytes_reserved,
      pool_in_use: s.pool_bytes_in_use,
      live_buffers: s.pool_live_buffers,
      staging: s.staging_bytes,
      pipelines: s.pipelines,
      ops: s.ops_completed
    }
  end
end
