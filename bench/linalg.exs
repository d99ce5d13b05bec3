# Cholesky factors, triangular solves, LU factorizations, general solves,
# determinants, QR factorizations, symmetric eigendecompositions and
# singular value decompositions through Nx on the default device, against the same
# calls on Nx.BinaryBackend (where this backend computed them before it had
# kernels: a download, the host, an upload).
#
#   mix run bench/linalg.exs [--reps N] [--host-max N] [--csv-out FILE]
#                            [--no-singular-check] [--types LIST]
#                            [--cholesky CASES] [--solve CASES]
#                            [--lu CASES] [--gesv CASES] [--det CASES]
#                            [--qr CASES] [--eigh CASES] [--svd CASES]
#                            [--chained auto|always|never]
#
# For each case (f32 and f64; a batch of symmetric positive definite
# matrices for `Nx.LinAlg.cholesky/1`, a batch of lower triangular systems
# with one or more right-hand sides for `Nx.LinAlg.triangular_solve/3`, a
# batch of matrices with entries in [-1, 1] for `Nx.LinAlg.lu/1`,
# `Nx.LinAlg.solve/2` (with one or more right-hand sides) and
# `Nx.LinAlg.determinant/1`, a batch of m x n matrices with entries in
# [-1, 1] for `Nx.LinAlg.qr/2`, a batch of symmetric matrices with
# eigenvalues 3 (-1/2)^k for `Nx.LinAlg.eigh/2`, a batch of m x n
# matrices with singular values 3 (1/2)^k for `Nx.LinAlg.svd/2`), after 3
# unmeasured calls:
#
#   * `e2e us`: the median over `--reps` (default 20) calls of one call
#     followed by `Nx.Vulkan.synchronize/0` (a triangular solve waits for
#     its singularity flags in the call itself);
#   * `pipelined us`: `--reps` calls back to back, then one synchronize,
#     per call (what a loop of independent factorizations costs);
#   * `gpu us`: GPU time per call from `Nx.Vulkan.stats/0`'s `gpu_busy_ns`
#     over the end-to-end calls (0 where the queue writes no timestamps);
# Each case starts after 0.3 s of large products (the GPU's clocks fall
# when it idles).
#
#   * `host ms`: one call on Nx.BinaryBackend, for orders up to
#     `--host-max` (default 64) and batches of at most 16 (its Cholesky is
#     Nx's default implementation: about a second for one matrix of order
#     64), and the ratio host / e2e.
#
# `--no-singular-check` sets `:singular_check` to false: triangular solves
# then return without downloading their singularity flags.
#
# `--types f32,f64` picks the types (default both); `--cholesky 1x256,4x512`,
# `--lu` and `--det` (batch x order), `--solve 1x1024x1,16x256x16` and
# `--gesv` (batch x order x right-hand sides; `--solve` the triangular
# solves, `--gesv` the general ones), `--qr 1x1024x1024,64x64x64`
# (batch x m x n), `--eigh 1x16,64x8` (batch x order) and `--svd
# 1x32x32,1x256x32` (batch x m x n) replace the default cases, an empty list skipping the op.
#
# `--chained` opens the device with that `chained_solve` option (default
# `auto`: on GPUs, solves of order 17 and more (up to 4096 blocks of 32
# rows times right-hand sides) are one dispatch of workgroups that wait on one
# another's rows; `never` takes the register, one-workgroup and panel
# kernels).
#
# `--csv-out FILE` writes the figures in the shared schema
# (`impl,test,dtype,shape,metric,value`; impl `nx_vulkan_nx` and
# `nx_binary`).
{opts, rest, invalid} =
  OptionParser.parse(System.argv(),
    strict: [
      reps: :integer,
      host_max: :integer,
      csv_out: :string,
      singular_check: :boolean,
      types: :string,
      cholesky: :string,
      solve: :string,
      lu: :string,
      gesv: :string,
      det: :string,
      qr: :string,
      eigh: :string,
      svd: :string,
      chained: :string
    ]
  )

reps = Keyword.get(opts, :reps, 20)
host_max = Keyword.get(opts, :host_max, 64)

usage = fn ->
  IO.puts(
    :stderr,
    "usage: mix run bench/linalg.exs [--reps N] [--host-max N] [--csv-out FILE] " <>
      "[--no-singular-check] [--types f32,f64] [--cholesky BxN,...] [--solve BxNxC,...] " <>
      "[--lu BxN,...] [--gesv BxNxC,...] [--det BxN,...] [--qr BxMxN,...] [--eigh BxN,...] [--svd BxMxN,...] " <>
      "[--chained auto|always|never]"
  )

  System.halt(2)
end

if rest != [] or invalid != [] or reps < 1, do: usage.()

# "1x256,4x512" -> [{1, 256}, {4, 512}] (each case `arity` integers).
parse_cases = fn text, arity ->
  for c <- String.split(text, ",", trim: true) do
    parts = String.split(c, "x")

    ints =
      Enum.map(parts, fn p ->
        case Integer.parse(p) do
          {i, ""} when i >= 0 -> i
          _ -> usage.()
        end
      end)

    if length(ints) != arity, do: usage.()
    List.to_tuple(ints)
  end
end

types =
  case opts[:types] do
    nil ->
      [{:f, 32}, {:f, 64}]

    text ->
      for t <- String.split(text, ",", trim: true) do
        case t do
          "f32" -> {:f, 32}
          "f64" -> {:f, 64}
          _ -> usage.()
        end
      end
  end

chained =
  case Keyword.get(opts, :chained, "auto") do
    c when c in ["auto", "always", "never"] -> String.to_atom(c)
    _ -> usage.()
  end

Application.put_env(:nx_vulkan, :singular_check, Keyword.get(opts, :singular_check, true))
Nx.default_backend(Nx.Vulkan.Backend)
index = Nx.Vulkan.default_device_index()
Nx.Vulkan.reopen(index, %{chained_solve: chained})
info = Nx.Vulkan.NIF.device_info(index)
IO.puts("device: #{info.name}, chained_solve: #{chained}\n")

# {batch, n} for Cholesky; {batch, n, right-hand sides} for the solves.
cholesky_cases =
  if text = opts[:cholesky],
    do: parse_cases.(text, 2),
    else: [{1, 16}, {1, 64}, {1, 256}, {1, 1024}, {256, 16}, {64, 64}, {16, 256}]

solve_cases =
  if text = opts[:solve],
    do: parse_cases.(text, 3),
    else: [{1, 64, 1}, {1, 256, 1}, {1, 1024, 1}, {1, 256, 256}, {256, 64, 1}, {16, 256, 16}]

lu_cases =
  if text = opts[:lu],
    do: parse_cases.(text, 2),
    else: [{1, 16}, {1, 64}, {1, 256}, {1, 1024}, {256, 16}, {64, 64}]

gesv_cases =
  if text = opts[:gesv],
    do: parse_cases.(text, 3),
    else: [{1, 16, 1}, {1, 64, 1}, {1, 256, 1}, {1, 1024, 1}, {256, 16, 1}, {64, 64, 4}]

det_cases =
  if text = opts[:det],
    do: parse_cases.(text, 2),
    else: [{1, 64}, {256, 8}]

qr_cases =
  if text = opts[:qr],
    do: parse_cases.(text, 3),
    else: [
      {1, 16, 16},
      {1, 64, 64},
      {1, 256, 256},
      {1, 1024, 1024},
      {1, 1024, 64},
      {256, 16, 16},
      {64, 64, 64}
    ]

eigh_cases =
  if text = opts[:eigh],
    do: parse_cases.(text, 2),
    else: [{1, 8}, {1, 16}, {1, 32}, {1, 64}, {64, 8}, {16, 32}]

svd_cases =
  if text = opts[:svd],
    do: parse_cases.(text, 3),
    else: [{1, 8, 8}, {1, 32, 32}, {1, 64, 64}, {1, 256, 32}, {16, 16, 16}]

key = Nx.Random.key(42)

# A batch of matrices with entries in [-1, 1].
general = fn batch, n, type ->
  {g, _} = Nx.Random.uniform(key, -1.0, 1.0, shape: {batch, n, n}, type: type)
  g
end

# A batch of symmetric positive definite matrices on the device: G G^T / n + I.
spd = fn batch, n, type ->
  {g, _} = Nx.Random.uniform(key, -1.0, 1.0, shape: {batch, n, n}, type: type)

  g
  |> Nx.dot([2], [0], Nx.transpose(g, axes: [0, 2, 1]), [1], [0])
  |> Nx.divide(n)
  |> Nx.add(Nx.eye(n, type: type))
end

# Lower triangular, well conditioned: a unit-to-two diagonal, small below it.
lower = fn batch, n, type ->
  {g, _} = Nx.Random.uniform(key, -1.0, 1.0, shape: {batch, n, n}, type: type)
  eye = Nx.eye(n, type: type)

  g
  |> Nx.divide(n)
  |> Nx.multiply(Nx.subtract(1, eye))
  |> Nx.add(Nx.multiply(eye, 1.5))
  |> Nx.tril()
end

median = fn list -> list |> Enum.sort() |> Enum.at(div(length(list), 2)) end

# The GPU's clocks fall when it idles and take a few hundred milliseconds of
# load to come back: 0.3 s of 2048^3 products before each case.
big = Nx.iota({2048, 2048}, type: :f32) |> Nx.divide(2048 * 2048)

warm = fn ->
  t0 = System.monotonic_time(:millisecond)

  Stream.repeatedly(fn -> Nx.dot(big, big) end)
  |> Enum.reduce_while(0, fn _, k ->
    if rem(k, 8) == 7, do: Nx.Vulkan.synchronize()
    if System.monotonic_time(:millisecond) - t0 < 300, do: {:cont, k + 1}, else: {:halt, k}
  end)

  Nx.Vulkan.synchronize()
end

measure = fn call ->
  warm.()
  for _ <- 1..3, do: call.()
  :ok = Nx.Vulkan.synchronize()
  before = Nx.Vulkan.stats(index)

  e2e =
    for _ <- 1..reps do
      {us, :ok} =
        :timer.tc(fn ->
          _ = call.()
          Nx.Vulkan.synchronize()
        end)

      us
    end

  after_ = Nx.Vulkan.stats(index)
  gpu = (after_.gpu_busy_ns - before.gpu_busy_ns) / reps / 1000

  {us, :ok} =
    :timer.tc(fn ->
      for _ <- 1..reps, do: call.()
      Nx.Vulkan.synchronize()
    end)

  {median.(e2e), us / reps, gpu}
end

IO.puts(
  String.pad_trailing("op", 18) <>
    String.pad_trailing("type", 6) <>
    String.pad_trailing("shape", 18) <>
    String.pad_leading("e2e us", 10) <>
    String.pad_leading("pipelined us", 14) <>
    String.pad_leading("gpu us", 10) <>
    String.pad_leading("host ms", 10) <> String.pad_leading("host/e2e", 10)
)

fmt = fn
  nil -> "-"
  x -> :erlang.float_to_binary(x / 1, decimals: 1)
end

rows =
  for type <- types,
      {op, cases} <- [
        cholesky: cholesky_cases,
        triangular_solve: solve_cases,
        lu: lu_cases,
        solve: gesv_cases,
        determinant: det_cases,
        qr: qr_cases,
        eigh: eigh_cases,
        svd: svd_cases
      ],
      c <- cases,
      reduce: [] do
    acc ->
      {shape_label, call, host_call, n, batch} =
        case {op, c} do
          {:cholesky, {batch, n}} ->
            a = spd.(batch, n, type)
            h = Nx.backend_copy(a, Nx.BinaryBackend)

            {"#{batch}x#{n}x#{n}", fn -> Nx.LinAlg.cholesky(a) end,
             fn -> Nx.LinAlg.cholesky(h) end, n, batch}

          {:triangular_solve, {batch, n, cols}} ->
            a = lower.(batch, n, type)
            {b, _} = Nx.Random.uniform(key, -1.0, 1.0, shape: {batch, n, cols}, type: type)
            ha = Nx.backend_copy(a, Nx.BinaryBackend)
            hb = Nx.backend_copy(b, Nx.BinaryBackend)

            {"#{batch}x#{n}x#{n} #{cols}", fn -> Nx.LinAlg.triangular_solve(a, b) end,
             fn -> Nx.LinAlg.triangular_solve(ha, hb) end, n, batch}

          {:lu, {batch, n}} ->
            a = general.(batch, n, type)
            h = Nx.backend_copy(a, Nx.BinaryBackend)
            {"#{batch}x#{n}x#{n}", fn -> Nx.LinAlg.lu(a) end, fn -> Nx.LinAlg.lu(h) end, n, batch}

          {:solve, {batch, n, cols}} ->
            a = general.(batch, n, type)
            {b, _} = Nx.Random.uniform(key, -1.0, 1.0, shape: {batch, n, cols}, type: type)
            ha = Nx.backend_copy(a, Nx.BinaryBackend)
            hb = Nx.backend_copy(b, Nx.BinaryBackend)

            {"#{batch}x#{n}x#{n} #{cols}", fn -> Nx.LinAlg.solve(a, b) end,
             fn -> Nx.LinAlg.solve(ha, hb) end, n, batch}

          {:determinant, {batch, n}} ->
            a = general.(batch, n, type)
            h = Nx.backend_copy(a, Nx.BinaryBackend)

            {"#{batch}x#{n}x#{n}", fn -> Nx.LinAlg.determinant(a) end,
             fn -> Nx.LinAlg.determinant(h) end, n, batch}

          {:qr, {batch, m, n}} ->
            {a, _} = Nx.Random.uniform(key, -1.0, 1.0, shape: {batch, m, n}, type: type)
            h = Nx.backend_copy(a, Nx.BinaryBackend)
            # Nx's default implementation, its constants on the host too.
            host_qr = fn ->
              Nx.with_default_backend(Nx.BinaryBackend, fn -> Nx.LinAlg.qr(h) end)
            end

            {"#{batch}x#{m}x#{n}", fn -> Nx.LinAlg.qr(a) end, host_qr, max(m, n), batch}

          {:eigh, {batch, n}} ->
            # Q diag(3 (-1/2)^k) Q^T, Q from the QR factorization of a
            # random matrix: eigenvalues of distinct magnitudes, on which
            # Nx's QR iteration converges (in about 20 iterations).
            {g, _} = Nx.Random.uniform(key, -1.0, 1.0, shape: {batch, n, n}, type: type)
            {q, _} = Nx.LinAlg.qr(g)
            l = Nx.tensor(for(k <- 0..(n - 1), do: 3.0 * :math.pow(-0.5, k)), type: type)
            a = Nx.dot(Nx.multiply(q, l), [2], [0], q, [2], [0])
            h = Nx.backend_copy(a, Nx.BinaryBackend)

            host_eigh = fn ->
              Nx.with_default_backend(Nx.BinaryBackend, fn -> Nx.LinAlg.eigh(h) end)
            end

            {"#{batch}x#{n}x#{n}", fn -> Nx.LinAlg.eigh(a) end, host_eigh, n, batch}

          {:svd, {batch, m, n}} ->
            # U diag(3 (1/2)^k) V^T, U and V from the QR factorizations of
            # random matrices: distinct singular values, so that the
            # eigendecomposition inside converges in about 20 iterations.
            k = min(m, n)
            {g, key2} = Nx.Random.uniform(key, -1.0, 1.0, shape: {batch, m, k}, type: type)
            {g2, _} = Nx.Random.uniform(key2, -1.0, 1.0, shape: {batch, n, k}, type: type)
            {u, _} = Nx.LinAlg.qr(g)
            {v, _} = Nx.LinAlg.qr(g2)
            l = Nx.tensor(for(i <- 0..(k - 1), do: 3.0 * :math.pow(0.5, i)), type: type)
            a = Nx.dot(Nx.multiply(u, l), [2], [0], v, [2], [0])
            h = Nx.backend_copy(a, Nx.BinaryBackend)

            host_svd = fn ->
              Nx.with_default_backend(Nx.BinaryBackend, fn -> Nx.LinAlg.svd(h) end)
            end

            {"#{batch}x#{m}x#{n}", fn -> Nx.LinAlg.svd(a) end, host_svd, max(m, n), batch}
        end

      {e2e, pipelined, gpu} = measure.(call)

      host_ms =
        if n <= host_max and batch <= 16 do
          {us, _} = :timer.tc(host_call)
          us / 1000
        end

      ratio = if host_ms, do: host_ms * 1000 / e2e

      IO.puts(
        String.pad_trailing("#{op}", 18) <>
          String.pad_trailing(Nx.Type.to_string(type), 6) <>
          String.pad_trailing(shape_label, 18) <>
          String.pad_leading(fmt.(e2e), 10) <>
          String.pad_leading(fmt.(pipelined), 14) <>
          String.pad_leading(fmt.(gpu), 10) <>
          String.pad_leading(fmt.(host_ms), 10) <>
          String.pad_leading(if(ratio, do: "#{round(ratio)}x", else: "-"), 10)
      )

      t = Nx.Type.to_string(type)

      acc ++
        [
          {"nx_vulkan_nx", op, t, shape_label, "us_per_call", e2e},
          {"nx_vulkan_nx", op, t, shape_label, "us_per_call_pipelined", pipelined},
          {"nx_vulkan_nx", op, t, shape_label, "gpu_us_per_call", gpu}
        ] ++
        if(host_ms,
          do: [{"nx_binary", op, t, shape_label, "us_per_call", host_ms * 1000}],
          else: []
        )
  end

if path = opts[:csv_out] do
  lines =
    for {i, t, d, s, m, v} <- rows,
        do: Enum.join([i, t, d, s, m, :erlang.float_to_binary(v / 1, [{:decimals, 3}])], ",")

  File.write!(path, Enum.join(["impl,test,dtype,shape,metric,value" | lines], "\n") <> "\n")
end
