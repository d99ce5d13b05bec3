# Random calls of every Nx.Vulkan.NIF function: valid ones built from real
# tensors of random type and shape, and malformed ones (wrong term types,
# sizes and offsets out of range, shapes whose element counts overflow,
# ranks past the maximum, unknown ops and types, mismatched types,
# deallocated tensors, foreign resources, tensors of two devices in one op,
# binaries of a partial element). Every call must either return a correct
# result or raise ArgumentError or Nx.Vulkan.Error with a message; any other
# exception, a crash, a sanitizer report or a hang fails the run.
#
# Needs no Nx: only Nx.Vulkan.NIF and Nx.Vulkan.Error. After `mix compile`:
#
#     mix run --no-compile --no-start test/fuzz/nif_fuzz.exs [--calls N] [--seed S]
#
# `make test-nif-fuzz` runs it against the NIF built with AddressSanitizer
# (NX_VULKAN_NIF, see docs/configuration.md). The seed is printed; the same
# seed and call count replay the same calls. --verbose prints each call
# before it runs; --no-fixed skips the fixed cases (reproducers of bugs the
# fuzzer found) that run first.

defmodule NxVulkan.NifFuzz do
  alias Nx.Vulkan.NIF
  import Bitwise

  @types ~w(s8 s16 s32 s64 u8 u16 u32 u64 f16 bf16 f32 f64 c64 c128)a
  @size %{s8: 1, s16: 2, s32: 4, s64: 8, u8: 1, u16: 2, u32: 4, u64: 8}
        |> Map.merge(%{f16: 2, bf16: 2, f32: 4, f64: 8, c64: 8, c128: 16})
  @sints ~w(s8 s16 s32 s64)a
  @uints ~w(u8 u16 u32 u64)a
  @ints @sints ++ @uints
  @floats ~w(f16 bf16 f32 f64)a
  @complex ~w(c64 c128)a
  @reals @ints ++ @floats
  # Kernels of these types take lavapipe up to a second each to compile
  # (those of the others tens of milliseconds): ops draw them rarely, for a
  # few ops and dense views only, so a run compiles few of them.
  @costly ~w(f64 c64 c128)a
  @cheap_types @types -- @costly
  @cheap_reals @reals -- @costly

  @binary_ops ~w(add subtract multiply divide max min pow remainder quotient atan2
                 bitwise_and bitwise_or bitwise_xor left_shift right_shift)a
  @unary_ops ~w(copy negate abs sign sqrt rsqrt exp log sin cos tanh sigmoid floor
                ceil round bitwise_not square expm1 log1p erf erfc erf_inv tan sinh cosh
                cbrt asin acos atan asinh acosh atanh count_leading_zeros
                population_count conjugate real imag phase)a
  @compare_ops ~w(equal not_equal less less_equal greater greater_equal logical_and
                  logical_or logical_xor)a
  @reduce_ops ~w(sum product max min)a
  # Ops whose kernels compile quickly on a CPU device; the others (evaluated
  # in double) are drawn rarely.
  @cheap_unary ~w(copy negate abs sign square floor ceil round sqrt rsqrt bitwise_not
                  count_leading_zeros population_count conjugate real imag)a
  @cheap_binary ~w(add subtract multiply max min bitwise_and left_shift)a
  @cheap_compare ~w(equal less greater_equal logical_and)a

  @max_rank 16
  @pool_cap 40
  @hang_s 60

  # ------------------------------------------------------------------
  # Entry point
  # ------------------------------------------------------------------

  def main(argv) do
    {opts, _, bad} =
      OptionParser.parse(argv,
        strict: [calls: :integer, seed: :integer, verbose: :boolean, fixed: :boolean]
      )

    if bad != [], do: abort("unknown arguments #{inspect(bad)}")
    calls = Keyword.get(opts, :calls, 100_000)

    seed =
      Keyword.get_lazy(opts, :seed, fn -> rem(System.os_time(:microsecond), 1_000_000_007) end)

    Process.put(:verbose, Keyword.get(opts, :verbose, false))
    :rand.seed(:exsss, {seed, seed >>> 7, 0x5EED})

    IO.puts("nif_fuzz: seed #{seed}, #{calls} calls (replay: --seed #{seed} --calls #{calls})")

    check_coverage()
    watchdog(seed)
    setup()
    t0 = System.monotonic_time(:millisecond)
    Process.put(:t0, t0)
    if Keyword.get(opts, :fixed, true), do: preamble()
    Process.put(:phase, :random)

    for i <- 1..calls//1 do
      Process.put(:call_index, i)
      one_call()
      if rem(i, 1000) == 0, do: health_check()
      if rem(i, 10_000) == 0, do: progress(i, t0)
    end

    health_check()
    finish(calls, t0)
  end

  defp abort(msg) do
    IO.puts(:stderr, "nif_fuzz: #{msg}")
    System.halt(2)
  end

  # Every exported function must have a generator: a NIF added later
  # without one fails here.
  defp check_coverage do
    exported = NIF.__info__(:functions) -- [load_nif: 0]
    missing = Enum.reject(exported, fn {f, a} -> {f, a} in Map.keys(generators()) end)
    if missing != [], do: abort("no generator for #{inspect(missing)}")
  end

  defp setup do
    Process.put(:counts, %{ok_verified: 0, ok_unverified: 0, argument_error: 0, device_error: 0})
    Process.put(:fixed, %{passed: 0})
    Process.put(:failures, [])
    Process.put(:setup_calls, 0)
    Process.put(:phase, :preamble)
    # a: the main device (outputs poisoned so unwritten elements show);
    # b: a second context of the same device, the source of foreign
    # tensors; v: a victim for injected faults. Each holds at most 512 MiB
    # so huge requests fail at once.
    base = %{pool_limit_bytes: 512 <<< 20}

    devs = %{
      a: NIF.open_device(-1, Map.put(base, :poison_outputs, true)),
      b: NIF.open_device(-1, base),
      v: NIF.open_device(-1, base)
    }

    Process.put(:devs, devs)
    Process.put(:device_count, NIF.device_count())
    for tag <- [:a, :b, :v], pool <- [:known, :scratch], do: Process.put({pool, tag}, [])
    Process.put(:dead, [])
    Process.put(:victim_faulted, false)
    # References that are not ours: plain, atomics, an ETS table, a NIF
    # resource of another library (crypto's hash state).
    Process.put(:other_resources, [
      make_ref(),
      :atomics.new(1, []),
      :ets.new(:nif_fuzz, []),
      :crypto.hash_init(:sha256)
    ])

    # A few tensors of every type to start with.
    for tag <- [:a, :a, :b, :v], type <- @types do
      t = new_tensor(tag, type, Enum.random(0..24), nice: true)
      if rand(4) == 0, do: forget(t), else: :ok
    end

    for _ <- 1..8, do: dead_tensor(:a)
  end

  # A hang: no call completes for @hang_s seconds. A NIF that never returns
  # holds its scheduler, and with it (the VM's thread progress stalled) the
  # timers and ports of other processes, so the watchdog runs outside the
  # VM: a shell that the fuzzer tells the index of the call under way (at
  # most every 200 ms: bash reads pipes a byte at a time). When it hears
  # nothing for @hang_s seconds it reports the last index and kills the VM;
  # when the VM dies (a sanitizer report) it names the last index too.
  @watchdog ~S"""
  last=setup
  while :; do
    IFS= read -r -t "$1" line
    rc=$?
    if [ "$rc" -gt 128 ]; then
      echo "nif_fuzz: FAILURE: no call completed for $1 s (hang) in or after $last;" \
        "--seed $3 --verbose prints each call before it runs" >&2
      kill -9 "$2"
      exit 1
    fi
    if [ "$rc" -ne 0 ]; then
      [ "$last" = done ] ||
        echo "nif_fuzz: FAILURE: the VM died in or after $last (--seed $3 --verbose prints each call)" >&2
      exit 0
    fi
    last=$line
  done
  """

  defp watchdog(seed) do
    bash = System.find_executable("bash") || abort("bash is needed for the hang watchdog")

    args = [
      "-c",
      @watchdog,
      "nif_fuzz_watchdog",
      to_string(@hang_s),
      System.pid(),
      to_string(seed)
    ]

    port = Port.open({:spawn_executable, bash}, [:binary, args: args])
    # (monotonic time may be negative)
    Process.put(:watchdog, {port, System.monotonic_time(:millisecond) - 1000})
  end

  # Tells the watchdog which call runs now.
  defp ping(label, always \\ false) do
    {port, last} = Process.get(:watchdog)
    now = System.monotonic_time(:millisecond)

    if always or now - last >= 200 do
      Port.command(port, [label, "\n"])
      Process.put(:watchdog, {port, now})
    end
  end

  defp progress(i, t0) do
    c = Process.get(:counts)
    s = (System.monotonic_time(:millisecond) - t0) / 1000

    IO.puts(
      "nif_fuzz: #{i} calls, #{:erlang.float_to_binary(s, decimals: 1)} s: " <>
        "ok_verified #{c.ok_verified}, ok_unverified #{c.ok_unverified}, " <>
        "argument_error #{c.argument_error}, device_error #{c.device_error}"
    )
  end

  defp finish(calls, t0) do
    ping("done", true)
    c = Process.get(:counts)
    s = (System.monotonic_time(:millisecond) - t0) / 1000
    failures = Enum.reverse(Process.get(:failures))

    IO.puts("""
    nif_fuzz: done: #{calls} random calls (+ #{Process.get(:fixed).passed} fixed cases, \
    #{Process.get(:setup_calls)} setup and check calls) in #{:erlang.float_to_binary(s, decimals: 1)} s
      ok_verified    #{c.ok_verified}
      ok_unverified  #{c.ok_unverified}
      argument_error #{c.argument_error}
      device_error   #{c.device_error}
      failures       #{length(failures)}\
    """)

    if failures != [] do
      for f <- Enum.take(failures, 20), do: IO.puts(:stderr, "FAILURE: " <> f)
      System.halt(1)
    end
  end

  defp fail(msg) do
    where =
      case Process.get(:phase) do
        :random -> "call #{Process.get(:call_index)}"
        phase -> to_string(phase)
      end

    line = "#{where}: #{msg}"
    IO.puts(:stderr, "FAILURE " <> line)
    Process.put(:failures, [line | Process.get(:failures)])

    if length(Process.get(:failures)) >= 50,
      do: finish(Process.get(:call_index, 0), Process.get(:t0, 0))
  end

  # The main device and the foreign one must stay healthy: only the victim
  # gets faults.
  defp health_check do
    devs = Process.get(:devs)

    for tag <- [:a, :b] do
      case setup_call(:device_status, [devs[tag]]) do
        :ok -> :ok
        other -> fail("device #{tag} failed: #{inspect(other)}")
      end
    end

    # The victim is reopened now and then so its healthy paths run too.
    if Process.get(:victim_faulted) and rand(10) == 0 do
      Process.put(:devs, %{devs | v: NIF.open_device(-1, %{pool_limit_bytes: 512 <<< 20})})
      Process.put({:known, :v}, [])
      Process.put({:scratch, :v}, [])
      Process.put(:victim_faulted, false)
    end
  end

  # ------------------------------------------------------------------
  # Random numbers
  # ------------------------------------------------------------------

  defp rand(n), do: :rand.uniform(n) - 1
  defp range(lo, hi), do: lo + rand(hi - lo + 1)
  defp chance(p), do: :rand.uniform() < p
  defp pick(list), do: Enum.at(list, rand(length(list)))

  defp weighted(pairs) do
    total = pairs |> Enum.map(&elem(&1, 1)) |> Enum.sum()
    x = rand(total)

    Enum.reduce_while(pairs, x, fn {v, w}, acc ->
      if acc < w, do: {:halt, {:found, v}}, else: {:cont, acc - w}
    end)
    |> then(fn {:found, v} -> v end)
  end

  # ------------------------------------------------------------------
  # Element encodings
  # ------------------------------------------------------------------

  defp es(t), do: Map.fetch!(@size, t)
  defp part(:c64), do: :f32
  defp part(:c128), do: :f64

  defp enc(t, v) when t in @sints do
    bits = es(t) * 8
    <<v::signed-native-size(bits)>>
  end

  defp enc(t, v) when t in @uints do
    bits = es(t) * 8
    <<v::unsigned-native-size(bits)>>
  end

  defp enc(:f16, v), do: <<v * 1.0::float-native-size(16)>>
  defp enc(:f32, v), do: <<v * 1.0::float-native-size(32)>>
  defp enc(:f64, v), do: <<v * 1.0::float-native-size(64)>>

  defp enc(:bf16, v) do
    <<bits::32>> = <<v * 1.0::float-32>>
    <<bits >>> 16::native-16>>
  end

  defp enc(t, {re, im}) when t in @complex, do: enc(part(t), re) <> enc(part(t), im)
  defp enc(t, v) when t in @complex, do: enc(t, {v, 0})

  # Values of nice data (finite); nil for anything else.
  defp dec(t, b) when t in @sints do
    bits = es(t) * 8
    <<v::signed-native-size(bits)>> = b
    v
  end

  defp dec(t, b) when t in @uints do
    bits = es(t) * 8
    <<v::unsigned-native-size(bits)>> = b
    v
  end

  defp dec(:bf16, <<lo::native-16>>) do
    case <<lo::16, 0::16>> do
      <<x::float-32>> -> x
      _ -> nil
    end
  end

  defp dec(t, b) when t in @floats do
    bits = es(t) * 8

    case b do
      <<x::float-native-size(bits)>> -> x
      _ -> nil
    end
  end

  defp dec(t, b) when t in @complex do
    h = div(es(t), 2)
    <<re::binary-size(h), im::binary-size(h)>> = b

    case {dec(part(t), re), dec(part(t), im)} do
      {nil, _} -> nil
      {_, nil} -> nil
      pair -> pair
    end
  end

  defp elems(bin, t) do
    size = es(t)
    for <<e::binary-size(size) <- bin>>, do: e
  end

  # Small integer values (exact in every type and in every op checked).
  defp nice_value(t) when t in @sints, do: range(-50, 50)
  defp nice_value(t) when t in @uints, do: range(0, 100)
  defp nice_value(t) when t in @floats, do: range(-50, 50) * 1.0
  defp nice_value(t) when t in @complex, do: {range(-20, 20) * 1.0, range(-20, 20) * 1.0}

  defp nice_data(t, n), do: for(_ <- 1..n//1, into: <<>>, do: enc(t, nice_value(t)))

  # Whether a result's data are small integers (then usable where exact
  # arithmetic is checked).
  defp nice?(t, bin) do
    Enum.all?(elems(bin, t), fn e ->
      case dec(t, e) do
        nil -> false
        {re, im} -> small?(re) and small?(im)
        v -> small?(v)
      end
    end)
  end

  defp small?(v) when is_integer(v), do: abs(v) <= 1000
  defp small?(v), do: v == Float.round(v) and abs(v) <= 1000

  defp real_part({re, _}), do: re
  defp real_part(v), do: v

  # ------------------------------------------------------------------
  # Pools of tensors
  # ------------------------------------------------------------------
  # A tensor is %{ref, dev, type, count, data, nice}: data is its contents
  # (nil when unknown). :known tensors are never written in place;
  # :scratch tensors (fresh buffers of unknown contents) may be the
  # destination of copy_into and scatter.

  defp setup_call(fun, args) do
    Process.put(:setup_calls, Process.get(:setup_calls) + 1)
    apply(NIF, fun, args)
  end

  defp dev(tag), do: Map.fetch!(Process.get(:devs), tag)

  defp new_tensor(tag, type, n, opts \\ []) do
    data =
      if Keyword.get(opts, :nice, chance(0.6)),
        do: nice_data(type, n),
        else: :rand.bytes(n * es(type))

    ref = setup_call(:upload, [dev(tag), type, data])
    t = %{ref: ref, dev: tag, type: type, count: n, data: data, nice: nice?(type, data)}
    remember(:known, t)
  end

  defp remember(pool, t) do
    key = {pool, t.dev}
    Process.put(key, Enum.take([t | Process.get(key)], @pool_cap))
    t
  end

  defp forget(t) do
    for pool <- [:known, :scratch] do
      key = {pool, t.dev}
      Process.put(key, Enum.reject(Process.get(key), &(&1.ref == t.ref)))
    end
  end

  defp dead_tensor(tag) do
    t = new_tensor(tag, pick(@types), rand(8))
    forget(t)
    :ok = setup_call(:deallocate, [t.ref])
    Process.put(:dead, Enum.take([t | Process.get(:dead)], @pool_cap))
    t
  end

  defp any_dead do
    case Process.get(:dead) do
      [] -> dead_tensor(:a)
      list -> pick(list)
    end
  end

  # A known tensor of tag matching pred, or nil.
  defp find(tag, pred) do
    case Enum.filter(Process.get({:known, tag}), pred) do
      [] -> nil
      list -> pick(list)
    end
  end

  defp any_tensor(tag, types \\ @types) do
    list =
      Enum.filter(Process.get({:known, tag}) ++ Process.get({:scratch, tag}), &(&1.type in types))

    if list == [], do: new_tensor(tag, pick(types), rand(8)), else: pick(list)
  end

  defp scratch(tag, type, n) do
    case Enum.filter(Process.get({:scratch, tag}), &(&1.type == type and &1.count >= n)) do
      list when list != [] and n > 0 ->
        pick(list)

      _ ->
        ref = setup_call(:empty, [dev(tag), type, n])
        remember(:scratch, %{ref: ref, dev: tag, type: type, count: n, data: nil, nice: false})
    end
  end

  # A tensor of type with exactly n elements (or at least n), nice when asked.
  defp tensor_of(tag, type, n, opts \\ []) do
    nice = Keyword.get(opts, :nice, false)
    exact = Keyword.get(opts, :exact, true)

    found =
      chance(0.5) &&
        find(tag, fn t ->
          t.type == type and (not nice or t.nice) and
            if(exact, do: t.count == n, else: t.count >= n)
        end)

    found || new_tensor(tag, type, n + if(exact, do: 0, else: rand(3)), nice: nice or chance(0.6))
  end

  defp pick_tag, do: weighted(a: 80, b: 14, v: 6)

  # ------------------------------------------------------------------
  # Shapes and views
  # ------------------------------------------------------------------

  defp prod(list), do: Enum.reduce(list, 1, &(&1 * &2))

  defp rand_shape(opts \\ []) do
    max_dim = Keyword.get(opts, :max_dim, 5)
    min_dim = Keyword.get(opts, :min_dim, 0)

    case weighted(small: 90, tiled: 4, high: 6) do
      :small ->
        rank =
          Keyword.get_lazy(opts, :rank, fn ->
            weighted([{0, 1}, {1, 3}, {2, 3}, {3, 2}, {4, 1}])
          end)

        for _ <- 1..rank//1,
            do: if(chance(0.04), do: max(min_dim, 0), else: range(max(min_dim, 1), max_dim))

      :tiled ->
        rank = Keyword.get(opts, :rank, 2 + rand(2))
        for i <- 1..rank//1, do: if(i <= rank - 2, do: range(1, 2), else: range(16, 20))

      :high ->
        rank = Keyword.get(opts, :rank, range(5, @max_rank))

        for i <- 1..rank//1,
            do: weighted([{1, 6}, {if(i <= 10, do: 2, else: 1), 2}, {0, 1}]) |> max(min_dim)
    end
  end

  defp dense_strides(shape) do
    {strides, _} =
      shape
      |> Enum.reverse()
      |> Enum.map_reduce(1, fn d, s -> {s, s * max(d, 1)} end)

    Enum.reverse(strides)
  end

  defp coords([]), do: [[]]
  defp coords([d | rest]), do: for(i <- 0..(d - 1)//1, c <- coords(rest), do: [i | c])

  defp dot(c, s), do: Enum.zip(c, s) |> Enum.reduce(0, fn {i, st}, acc -> acc + i * st end)

  # Element indices a view reads, row-major over shape.
  defp view_indices(shape, strides, offset),
    do: for(c <- coords(shape), do: offset + dot(c, strides))

  # Span [lo, hi] of the offsets a strided walk over shape reaches.
  defp span(shape, strides) do
    Enum.zip(shape, strides)
    |> Enum.reduce({0, 0}, fn {d, s}, {lo, hi} ->
      x = s * (d - 1)
      if x > 0, do: {lo, hi + x}, else: {lo + x, hi}
    end)
  end

  # A view over shape of a tensor of type on tag: %{t, offset, strides (the
  # term: nil or a list), resolved (the strides it means)}.
  defp make_view(tag, type, shape, opts \\ []) do
    n = prod(shape)
    nice = Keyword.get(opts, :nice, false)

    modes =
      if Keyword.get(opts, :dense, false),
        do: [dense: 1],
        else: [dense: 3, dense_off: 1, strided: 4, broadcast: 1]

    case weighted(modes) do
      mode when mode in [:dense, :dense_off] ->
        off = if mode == :dense_off, do: range(1, 3), else: 0
        exact = mode == :dense and n > 0
        t = tensor_of(tag, type, if(n == 0, do: rand(3), else: n + off), nice: nice, exact: exact)
        %{t: t, offset: off, strides: nil, resolved: dense_strides(shape)}

      mode ->
        strides =
          for _ <- shape,
              do: if(mode == :broadcast and chance(0.5), do: 0, else: range(-3, 3))

        {lo, hi} = span(shape, strides)

        if n == 0 do
          t = tensor_of(tag, type, rand(3), nice: nice, exact: false)
          %{t: t, offset: rand(3), strides: strides, resolved: strides}
        else
          off = -lo + rand(3)
          t = tensor_of(tag, type, off + hi + 1, nice: nice, exact: false)
          %{t: t, offset: off, strides: strides, resolved: strides}
        end
    end
  end

  # Element binaries a view reads.
  defp view_elems(v, shape) do
    all = List.to_tuple(elems(v.t.data, v.t.type))
    for i <- view_indices(shape, v.resolved, v.offset), do: elem(all, i)
  end

  defp view_args(v), do: [v.t.ref, v.offset, v.strides]
  defp view_kinds(v), do: [{:tensor, v.t.dev}, :i64, {:strides, length(v.resolved)}]

  # ------------------------------------------------------------------
  # Calls
  # ------------------------------------------------------------------
  # A generator returns %{fun, args, kinds, check, strict}: kinds name what
  # each argument is (for mutations); check judges a successful result of
  # the unmutated call (:verified, :unverified or {:fail, why}); strict
  # calls must succeed unmutated.

  defp generators do
    %{
      {:device_count, 0} => {1, &g_device_count/0},
      {:default_device_index, 0} => {1, &g_default_device_index/0},
      {:clock_ns, 0} => {1, &g_clock_ns/0},
      {:device_info, 1} => {2, &g_device_info/0},
      {:open_device, 2} => {2, &g_open_device/0},
      {:device_stats, 1} => {2, &g_device_stats/0},
      {:record_batches, 2} => {2, &g_record_batches/0},
      {:take_batches, 1} => {2, &g_take_batches/0},
      {:synchronize, 1} => {2, &g_synchronize/0},
      {:device_status, 1} => {2, &g_device_status/0},
      {:trim, 1} => {1, &g_trim/0},
      {:save_pipeline_cache, 1} => {1, &g_save_pipeline_cache/0},
      {:inject_fault, 2} => {1, &g_inject_fault/0},
      {:supported, 4} => {3, &g_supported/0},
      {:upload, 3} => {6, &g_upload/0},
      {:upload_dirty, 3} => {2, &g_upload_dirty/0},
      {:download, 3} => {6, &g_download/0},
      {:deallocate, 1} => {3, &g_deallocate/0},
      {:deallocate_many, 1} => {2, &g_deallocate_many/0},
      {:tensor_info, 1} => {3, &g_tensor_info/0},
      {:copy, 1} => {3, &g_copy/0},
      {:reinterpret, 2} => {3, &g_reinterpret/0},
      {:empty, 3} => {3, &g_empty/0},
      {:copy_into, 7} => {6, &g_copy_into/0},
      {:binary, 8} => {8, &g_binary/0},
      {:fused, 4} => {4, &g_fused/0},
      {:fused_into, 6} => {3, &g_fused_into/0},
      {:fused_program, 3} => {2, &g_fused_program/0},
      {:fused_program, 4} => {1, &g_fused_program_pair/0},
      {:fused_check, 5} => {2, &g_fused_check/0},
      {:fused_pair, 9} => {3, &g_fused_pair/0},
      {:unary, 5} => {7, &g_unary/0},
      {:compare, 8} => {4, &g_compare/0},
      {:select, 10} => {4, &g_select/0},
      {:convert, 5} => {5, &g_convert/0},
      {:reduce, 7} => {6, &g_reduce/0},
      {:argreduce, 7} => {3, &g_argreduce/0},
      {:gather, 8} => {4, &g_gather/0},
      {:scatter, 9} => {4, &g_scatter/0},
      {:sort, 5} => {3, &g_sort/0},
      {:window_reduce, 8} => {3, &g_window_reduce/0},
      {:fft, 5} => {2, &g_fft/0},
      {:cholesky, 4} => {2, &g_cholesky/0},
      {:lu, 4} => {2, &g_lu/0},
      {:qr, 6} => {2, &g_qr/0},
      {:eigh_iterate, 6} => {2, &g_eigh_iterate/0},
      {:triangular_solve, 8} => {2, &g_triangular_solve/0},
      {:conv, 12} => {4, &g_conv/0},
      {:window_scatter, 9} => {3, &g_window_scatter/0},
      {:transpose, 3} => {4, &g_transpose/0},
      {:matmul, 10} => {4, &g_matmul/0},
      {:fill, 4} => {4, &g_fill/0},
      {:iota, 4} => {4, &g_iota/0},
      {:replay_index, 2} => {1, &g_replay_index/0},
      {:replay, 2} => {4, &g_replay/0},
      {:replay_counts, 0} => {1, &g_replay_counts/0}
    }
  end

  defp one_call do
    # Sorted: the order of a map's keys may change between runs.
    gens =
      Process.get(:gen_list) ||
        generators() |> Enum.sort() |> Enum.map(fn {_, {w, g}} -> {g, w} end)

    Process.put(:gen_list, gens)
    {call, args, sev, mutated} = build(gens, 5)
    run(call, args, sev, mutated)
  end

  # A random call, mutated or not. Building it may need setup calls on the
  # victim, which fail once a fault was injected: another one is drawn then.
  defp build(gens, tries) do
    call = weighted(gens).()

    {args, sev, mutated} =
      if call.args != [] and chance(0.55), do: mutate(call), else: {call.args, nil, []}

    {call, args, sev, mutated}
  rescue
    e in Nx.Vulkan.Error ->
      if tries > 0 and Process.get(:victim_faulted),
        do: build(gens, tries - 1),
        else: reraise(e, __STACKTRACE__)
  end

  # Runs one call and judges its outcome.
  defp run(call, args, sev, mutated) do
    what = {call.fun, args, mutated}
    ping("call #{Process.get(:call_index)}")
    if Process.get(:verbose), do: IO.puts(describe(what))
    outcome = attempt(call.fun, args)
    judge(call, sev, outcome, what)
    after_effects(call.fun, args, outcome)
  end

  # State a successful call changed, whatever its arguments were: a
  # deallocated tensor leaves the pools; an injected fault is made to
  # strike at once (so a seed replays the same calls).
  defp after_effects(:deallocate, [ref], {:ok, :ok}) do
    for tag <- [:a, :b, :v],
        pool <- [:known, :scratch],
        t <- Process.get({pool, tag}),
        t.ref == ref do
      forget(t)
      Process.put(:dead, Enum.take([t | Process.get(:dead)], @pool_cap))
    end
  end

  defp after_effects(:deallocate_many, [refs], {:ok, :ok}) when is_list(refs) do
    for ref <- refs, do: after_effects(:deallocate, [ref], {:ok, :ok})
  end

  defp after_effects(:inject_fault, [dev, _], {:ok, :ok}) do
    with {:ok, _} <- attempt(:fill, [dev, :u8, 1, <<0>>]), do: attempt(:synchronize, [dev])
    Process.put(:victim_faulted, true)
  end

  defp after_effects(_fun, _args, _outcome), do: :ok

  defp describe({fun, args, mutated}) do
    a = Enum.map_join(args, ", ", &inspect(&1, limit: 12, printable_limit: 32))
    m = if mutated == [], do: "", else: " [mutated #{inspect(mutated, charlists: :as_lists)}]"
    "NIF.#{fun}(#{a})#{m}"
  end

  defp attempt(fun, args) do
    {:ok, apply(NIF, fun, args)}
  rescue
    e in ArgumentError -> {:argument_error, e}
    e in Nx.Vulkan.Error -> {:device_error, e}
    e -> {:other, e, __STACKTRACE__}
  catch
    kind, value -> {:other, {kind, value}, __STACKTRACE__}
  end

  defp count(key), do: Process.put(:counts, Map.update!(Process.get(:counts), key, &(&1 + 1)))

  defp judge(call, sev, outcome, what) do
    case outcome do
      {:argument_error, %ArgumentError{message: msg}} ->
        count(:argument_error)

        cond do
          not is_binary(msg) or msg == "" or msg == "argument error" ->
            fail("ArgumentError without a message naming the problem: #{describe(what)}")

          sev == nil and strict?(call) ->
            fail("a valid call raised ArgumentError #{inspect(msg)}: #{describe(what)}")

          true ->
            :ok
        end

      {:device_error, %Nx.Vulkan.Error{message: msg, status: status}} ->
        count(:device_error)

        cond do
          not is_binary(msg) or msg == "" or not is_atom(status) ->
            fail("Nx.Vulkan.Error without status or message: #{describe(what)}")

          sev == nil and strict?(call) ->
            fail(
              "a valid call raised Nx.Vulkan.Error #{inspect(status)} #{inspect(msg)}: #{describe(what)}"
            )

          true ->
            :ok
        end

      {:other, e, stack} ->
        fail("unexpected #{inspect(e)}: #{describe(what)}\n#{Exception.format_stacktrace(stack)}")

      {:ok, result} when sev == :must ->
        count(:ok_unverified)
        fail("invalid call accepted, returned #{inspect(result, limit: 8)}: #{describe(what)}")

      {:ok, result} when sev != nil ->
        count(:ok_unverified)

        case sanity(call.fun, result) do
          :ok -> :ok
          {:fail, why} -> fail("#{why}: #{describe(what)}")
        end

      {:ok, result} ->
        case safe_check(call, result) do
          :verified -> count(:ok_verified)
          :unverified -> count(:ok_unverified)
          {:fail, why} -> count(:ok_unverified) && fail("#{why}: #{describe(what)}")
        end
    end
  end

  defp safe_check(call, result) do
    call.check.(result)
  rescue
    e -> {:fail, "checking the result raised #{Exception.format(:error, e, __STACKTRACE__)}"}
  end

  # Strict calls must succeed, except on the victim device (which may have
  # failed).
  defp strict?(call) do
    call.strict and
      not Enum.any?(call.kinds, fn
        {k, :v} when k in [:device, :tensor, :tensor_dst, :opt_tensor, :opt_dst] -> true
        {:views, tags, _} -> :v in tags
        _ -> false
      end)
  end

  # What a successful call of a mutated (possibly still valid) call must
  # look like.
  defp sanity(fun, result) do
    cond do
      fun in [:device_count, :default_device_index, :clock_ns] and is_integer(result) and
          result >= 0 ->
        :ok

      fun in [:device_info, :device_stats] and is_map(result) ->
        :ok

      fun == :open_device and is_reference(result) ->
        :ok

      fun == :take_batches and match?({list, n} when is_list(list) and is_integer(n), result) ->
        :ok

      fun == :device_status and
          (result == :ok or match?({s, m} when is_atom(s) and is_binary(m), result)) ->
        :ok

      fun == :supported and is_boolean(result) ->
        :ok

      fun == :deallocate and result in [:ok, :already_deallocated] ->
        :ok

      fun == :download and is_binary(result) ->
        :ok

      fun == :tensor_info and match?({t, n} when t in @types and is_integer(n), result) ->
        :ok

      fun in [
        :record_batches,
        :synchronize,
        :trim,
        :save_pipeline_cache,
        :inject_fault,
        :copy_into,
        :fused_into,
        :fused_check,
        :scatter,
        :deallocate_many
      ] and result == :ok ->
        :ok

      fun == :replay_index and (result == nil or is_integer(result)) ->
        :ok

      fun == :fused_program and is_reference(result) ->
        :ok

      fun in [:sort, :triangular_solve, :lu, :qr, :eigh_iterate, :replay, :fused_pair] and
          is_tuple(result) ->
        result |> Tuple.to_list() |> Enum.map(&live_tensor/1) |> Enum.find(:ok, &(&1 != :ok))

      fun not in [
        :device_count,
        :default_device_index,
        :clock_ns,
        :device_info,
        :device_stats,
        :open_device,
        :take_batches,
        :device_status,
        :supported,
        :deallocate,
        :download,
        :tensor_info,
        :record_batches,
        :synchronize,
        :trim,
        :save_pipeline_cache,
        :inject_fault,
        :copy_into,
        :fused_into,
        :fused_check,
        :scatter,
        :deallocate_many,
        :replay_index,
        :replay
      ] ->
        live_tensor(result)

      true ->
        {:fail, "unexpected result #{inspect(result, limit: 8)}"}
    end
  end

  # A tensor result: its info names a type and a count, and its first
  # elements download.
  defp live_tensor(ref) do
    with true <- is_reference(ref),
         {type, n} when type in @types and is_integer(n) <- setup_call(:tensor_info, [ref]),
         k = min(n, 16),
         bytes = k * es(type),
         bin when bin == :device_failed or byte_size(bin) == bytes <- fetch(ref, 0, k) do
      :ok
    else
      other -> {:fail, "result is not a live tensor (#{inspect(other, limit: 8)})"}
    end
  end

  # A download in a check: :device_failed where the device (the victim)
  # has failed.
  defp fetch(ref, off, n) do
    Process.put(:setup_calls, Process.get(:setup_calls) + 1)

    case attempt(:download, [ref, off, n]) do
      {:ok, bin} -> bin
      {:device_error, _} -> :device_failed
      {_, e} -> raise e
      {:other, e, _} -> raise inspect(e)
    end
  end

  # Checks a tensor result against its type and count, then its contents
  # when expected is a binary; the result joins the pools.
  defp expect_tensor(ref, tag, type, n, expected) do
    case setup_call(:tensor_info, [ref]) do
      {^type, ^n} ->
        t = %{ref: ref, dev: tag, type: type, count: n, data: nil, nice: false}

        cond do
          is_binary(expected) ->
            got = fetch(ref, 0, n)

            cond do
              got == :device_failed and tag == :v ->
                :unverified

              got == expected ->
                remember(:known, %{t | data: got, nice: nice?(type, got)})
                :verified

              true ->
                {:fail, "wrong result: got #{show(type, got)}, expected #{show(type, expected)}"}
            end

          chance(0.2) ->
            got = fetch(ref, 0, n)

            if got == :device_failed or byte_size(got) == n * es(type) do
              remember(:scratch, t)
              :unverified
            else
              {:fail, "downloaded #{byte_size(got)} bytes of #{n} #{type}"}
            end

          true ->
            remember(:scratch, t)
            :unverified
        end

      other ->
        {:fail, "result info #{inspect(other)}, expected #{inspect({type, n})}"}
    end
  end

  defp show(_type, term) when not is_binary(term), do: inspect(term)

  defp show(type, bin) do
    list = elems(bin, type) |> Enum.take(24) |> Enum.map(&(dec(type, &1) || &1))
    inspect(list, limit: 24) <> if(byte_size(bin) > 24 * es(type), do: "...", else: "")
  end

  defp mk(fun, args, kinds, check, strict \\ true),
    do: %{fun: fun, args: args, kinds: kinds, check: check, strict: strict}

  # ------------------------------------------------------------------
  # Device generators
  # ------------------------------------------------------------------

  defp g_device_count do
    mk(:device_count, [], [], fn n ->
      if is_integer(n) and n >= 1, do: :verified, else: {:fail, "device_count #{inspect(n)}"}
    end)
  end

  # The runtime's monotonic clock: positive and never behind its last reading.
  defp g_clock_ns do
    mk(:clock_ns, [], [], fn t ->
      last = Process.get(:last_clock_ns, 0)
      Process.put(:last_clock_ns, t)

      if is_integer(t) and t > 0 and t >= last,
        do: :verified,
        else: {:fail, "clock_ns #{inspect(t)} after #{last}"}
    end)
  end

  defp g_default_device_index do
    mk(:default_device_index, [], [], fn i ->
      if is_integer(i) and i in 0..(Process.get(:device_count) - 1),
        do: :verified,
        else: {:fail, "default_device_index #{inspect(i)}"}
    end)
  end

  defp g_device_info do
    i = rand(Process.get(:device_count))

    mk(:device_info, [i], [:u32], fn
      %{index: ^i, name: name, features: %{}, limits: %{}} when is_binary(name) -> :verified
      other -> {:fail, "device_info #{inspect(other, limit: 6)}"}
    end)
  end

  @open_opts [
    max_batch_nodes: [1, 4, 512],
    idle_flush_us: [0, 5, 100],
    kick_nodes: [1, 16],
    kick_inflight: [1, 3, 16],
    wait_spin_us: [0, 50],
    idle_spin_us: [0, 200],
    ring_capacity: [4, 64, 4096],
    staging_bytes: [65536, 1 <<< 20],
    arena_bytes: [65536, 4 <<< 20],
    pool_limit_bytes: [64 <<< 20],
    max_batch_cost: [1, 1 <<< 28],
    disable_disk_cache: [true, false],
    poison_outputs: [true, false],
    fast_math: [true, false],
    unmapped_small: [true, false],
    no_latency_timing: [true, false],
    no_gpu_timestamps: [true, false],
    defer_elementwise: [true, false],
    no_spirv_prune: [true, false],
    pipeline_threads: [:off, :auto, 1, 3],
    download_kernel: [:auto, :always, :never]
  ]

  defp g_open_device do
    opts =
      for {k, vs} <- @open_opts,
          chance(0.3),
          into: %{pool_limit_bytes: 64 <<< 20},
          do: {k, pick(vs)}

    idx = if chance(0.5), do: -1, else: rand(Process.get(:device_count))

    # Opening a device is slow: most of these calls are malformed ones.
    mk(:open_device, [idx, opts], [:device_index, :opts], fn d ->
      with true <- is_reference(d),
           data = nice_data(:s32, 5),
           t when is_reference(t) <- setup_call(:upload, [d, :s32, data]),
           ^data <- setup_call(:download, [t, 0, 5]) do
        :verified
      else
        other -> {:fail, "a new device does not round-trip #{inspect(other, limit: 6)}"}
      end
    end)
  end

  defp dev_call(fun, extra_args, extra_kinds, check, tags \\ [:a, :b, :v]) do
    tag = pick(tags)
    mk(fun, [dev(tag) | extra_args], [{:device, tag} | extra_kinds], check)
  end

  defp g_device_stats do
    dev_call(:device_stats, [], [], fn
      %{pool_bytes_in_use: n, op_latency: %{buckets: b}} when is_integer(n) and length(b) == 32 ->
        :verified

      other ->
        {:fail, "device_stats #{inspect(other, limit: 6)}"}
    end)
  end

  defp g_record_batches do
    dev_call(:record_batches, [chance(0.5)], [:bool], &ok_result/1)
  end

  # A batch record: counts and durations, then its first op's recording
  # and its submission (in that order), and (0, or in order after them) its
  # GPU start and end on the runtime's clock.
  defp valid_batch_record?(
         {ops, bytes, wait, gpu, latency, recorded, submitted, started, ended} = record
       ) do
    Enum.all?(Tuple.to_list(record), &(is_integer(&1) and &1 >= 0)) and ops >= 1 and
      bytes >= 0 and wait >= 0 and gpu >= 0 and latency >= 0 and recorded > 0 and
      submitted >= recorded and
      ((started == 0 and ended == 0) or (started > 0 and ended >= started))
  end

  defp valid_batch_record?(_), do: false

  defp g_take_batches do
    dev_call(:take_batches, [], [], fn
      {list, dropped} when is_list(list) and is_integer(dropped) ->
        if Enum.all?(list, &valid_batch_record?/1),
          do: :verified,
          else: {:fail, "take_batches records #{inspect(list, limit: 4)}"}

      other ->
        {:fail, "take_batches #{inspect(other, limit: 6)}"}
    end)
  end

  defp g_synchronize, do: dev_call(:synchronize, [], [], &ok_result/1)
  defp g_trim, do: dev_call(:trim, [], [], &ok_result/1)

  defp g_device_status do
    dev_call(:device_status, [], [], fn
      :ok -> :verified
      {s, m} when is_atom(s) and is_binary(m) -> :unverified
      other -> {:fail, "device_status #{inspect(other)}"}
    end)
  end

  defp g_save_pipeline_cache do
    %{dev_call(:save_pipeline_cache, [], [], &ok_result/1) | strict: false}
  end

  # Faults go to the victim only (mutations never put another device here).
  defp g_inject_fault do
    mk(
      :inject_fault,
      [dev(:v), pick([:device_lost, :submit_failed])],
      [{:device, :victim}, {:choice, [:device_lost, :submit_failed]}],
      &ok_result/1
    )
  end

  defp ok_result(:ok), do: :verified
  defp ok_result(other), do: {:fail, "expected :ok, got #{inspect(other, limit: 6)}"}

  defp g_supported do
    kind = pick([:binary, :unary, :compare, :select, :convert])

    op =
      case kind do
        :binary -> pick(@binary_ops)
        :unary -> pick(@unary_ops)
        :compare -> pick(@compare_ops)
        _ -> pick([:add, nil])
      end

    dev_call(
      :supported,
      [kind, op, pick(@types)],
      [{:choice, [:binary, :unary, :compare, :select, :convert]}, :any, :dtype],
      fn b -> if is_boolean(b), do: :verified, else: {:fail, "supported #{inspect(b)}"} end
    )
  end

  # ------------------------------------------------------------------
  # Tensor generators
  # ------------------------------------------------------------------

  defp g_upload,
    do: upload_gen(:upload, weighted([{0, 1}, {range(1, 64), 8}, {range(65, 600), 1}]))

  # Dirty uploads are for large binaries: past 64 KiB sometimes, so the
  # download that checks them takes the dirty path too.
  defp g_upload_dirty,
    do: upload_gen(:upload_dirty, weighted([{range(0, 64), 3}, {range(16_400, 20_000), 1}]))

  defp upload_gen(fun, n) do
    tag = pick_tag()
    type = pick(@types)
    data = if chance(0.6), do: nice_data(type, n), else: :rand.bytes(n * es(type))

    mk(fun, [dev(tag), type, data], [{:device, tag}, :dtype, {:binary, type}], fn ref ->
      expect_tensor(ref, tag, type, n, data)
    end)
  end

  defp g_download do
    tag = pick_tag()
    t = find(tag, &(&1.data != nil)) || new_tensor(tag, pick(@types), rand(40))
    off = rand(t.count + 1)
    n = rand(t.count - off + 1)
    expected = binary_part(t.data, off * es(t.type), n * es(t.type))

    mk(:download, [t.ref, off, n], [{:tensor, tag}, :u64, :u64], fn
      ^expected ->
        :verified

      other ->
        {:fail, "download returned #{show(t.type, other)}, expected #{show(t.type, expected)}"}
    end)
  end

  defp g_deallocate do
    tag = pick_tag()

    if chance(0.2) do
      t = any_dead()
      mk(:deallocate, [t.ref], [{:tensor, t.dev}], &dealloc_result(&1, t, :already_deallocated))
    else
      # It leaves the pools when the call succeeds (after_effects/3).
      t = any_tensor(tag)
      mk(:deallocate, [t.ref], [{:tensor, tag}], &dealloc_result(&1, t, :ok))
    end
  end

  # After deallocate, the tensor is gone: info and ops on it raise.
  defp dealloc_result(got, t, want) do
    cond do
      got != want ->
        {:fail, "deallocate returned #{inspect(got)}, expected #{inspect(want)}"}

      match?({:ok, _}, attempt(:tensor_info, [t.ref])) ->
        {:fail, "tensor_info of a deallocated tensor succeeded"}

      setup_call(:deallocate, [t.ref]) != :already_deallocated ->
        {:fail, "a second deallocate did not return :already_deallocated"}

      true ->
        :verified
    end
  end

  # A list of tensors of one device, some perhaps deallocated already:
  # :ok, and every one of them deallocated after.
  defp g_deallocate_many do
    tag = pick_tag()
    ts = for _ <- 1..rand(4)//1, do: if(chance(0.2), do: any_dead(), else: any_tensor(tag))

    mk(:deallocate_many, [Enum.map(ts, & &1.ref)], [:any], fn
      :ok ->
        if Enum.any?(ts, &match?({:ok, _}, attempt(:tensor_info, [&1.ref]))),
          do: {:fail, "a tensor of the list is alive after deallocate_many"},
          else: :verified

      other ->
        {:fail, "deallocate_many returned #{inspect(other)}"}
    end)
  end

  defp g_tensor_info do
    t = any_tensor(pick_tag())
    want = {t.type, t.count}

    mk(:tensor_info, [t.ref], [{:tensor, t.dev}], fn
      ^want -> :verified
      other -> {:fail, "tensor_info #{inspect(other)}, expected #{inspect(want)}"}
    end)
  end

  defp g_copy do
    tag = pick_tag()
    t = find(tag, &(&1.data != nil)) || new_tensor(tag, pick(@types), rand(40))

    mk(:copy, [t.ref], [{:tensor, tag}], fn ref ->
      expect_tensor(ref, tag, t.type, t.count, t.data)
    end)
  end

  defp g_reinterpret do
    tag = pick_tag()
    t = find(tag, &(&1.data != nil)) || new_tensor(tag, pick(@types), rand(40))
    type = @types |> Enum.filter(&(es(&1) == es(t.type))) |> pick()

    mk(:reinterpret, [t.ref, type], [{:tensor, tag}, :dtype], fn ref ->
      expect_tensor(ref, tag, type, t.count, t.data)
    end)
  end

  defp g_empty do
    tag = pick_tag()
    type = pick(@types)
    n = weighted([{0, 1}, {range(1, 64), 8}, {range(65, 5000), 1}])

    mk(:empty, [dev(tag), type, n], [{:device, tag}, :dtype, :u64], fn ref ->
      expect_tensor(ref, tag, type, n, nil)
    end)
  end

  defp g_fill do
    tag = pick_tag()
    type = pick(@types)
    n = weighted([{0, 1}, {range(1, 64), 8}, {range(65, 3000), 1}])
    value = :rand.bytes(es(type))

    %{
      mk(
        :fill,
        [dev(tag), type, n, value],
        [{:device, tag}, :dtype, :u64, {:binary, type}],
        fn ref ->
          expect_tensor(ref, tag, type, n, :binary.copy(value, n))
        end
      )
      | strict: type != :c128
    }
  end

  defp g_iota do
    tag = pick_tag()
    type = pick(@types)
    shape = rand_shape(max_dim: 6)
    rank = length(shape)
    axis = if rank == 0, do: 0, else: rand(rank)

    expected =
      for c <- coords(shape),
          into: <<>>,
          do: enc(type, if(rank == 0, do: 0, else: Enum.at(c, axis)))

    mk(
      :iota,
      [dev(tag), type, shape, axis],
      [{:device, tag}, :dtype, :shape, {:index, rank}],
      fn ref ->
        expect_tensor(ref, tag, type, prod(shape), expected)
      end
    )
  end

  # ------------------------------------------------------------------
  # Elementwise generators
  # ------------------------------------------------------------------

  defp op_tag, do: weighted(a: 97, b: 2, v: 1)

  defp g_unary do
    tag = op_tag()
    costly = chance(0.03)
    type = if costly, do: pick(@costly), else: pick(@cheap_types)
    shape = rand_shape()

    op =
      if costly,
        do: pick([:copy, :negate]),
        else: weighted([{:copy, 4}, {:negate, 3}, {pick(@cheap_unary), 3}])

    checked = op in [:copy, :negate]
    v = make_view(tag, type, shape, nice: checked and type not in @ints, dense: costly)
    n = prod(shape)

    out_type =
      if type in @complex and op in [:abs, :real, :imag, :phase], do: part(type), else: type

    mk(
      :unary,
      [op, shape | view_args(v)],
      [{:op, @unary_ops}, :shape | view_kinds(v)],
      fn ref ->
        expected =
          if checked and v.t.data != nil and (type in @ints or v.t.nice) do
            src = view_elems(v, shape)

            if op == :copy,
              do: IO.iodata_to_binary(src),
              else: for(e <- src, into: <<>>, do: negate(type, e))
          end

        expect_tensor(ref, tag, out_type, n, expected)
      end,
      op in @cheap_unary and supported?(tag, :unary, op, type)
    )
  end

  defp negate(t, e) when t in @ints, do: enc(t, -dec(t, e))

  defp negate(t, e) when t in @complex do
    h = div(es(t), 2)
    <<re::binary-size(h), im::binary-size(h)>> = e
    negate(part(t), re) <> negate(part(t), im)
  end

  defp negate(_t, e) do
    # The sign bit is the top bit of the last byte (little-endian).
    n = byte_size(e) - 1
    <<low::binary-size(n), top>> = e
    low <> <<bxor(top, 0x80)>>
  end

  defp supported?(tag, kind, op, type) do
    tag != :v and setup_call(:supported, [dev(tag), kind, op, type])
  end

  defp g_binary do
    tag = op_tag()
    verify = chance(0.5)
    costly = not verify and chance(0.03)

    type =
      cond do
        verify -> pick([:s32, :f32])
        costly -> pick(@costly)
        true -> pick(@cheap_types)
      end

    op =
      if verify,
        do: pick([:add, :multiply]),
        else: weighted([{pick(@cheap_binary), 200}, {pick(@binary_ops), 1}])

    shape = rand_shape()
    op = if costly, do: :add, else: op
    va = make_view(tag, type, shape, nice: verify and type == :f32, dense: costly)
    n = prod(shape)
    # b: a view, or an immediate scalar on either side (one element's bytes).
    {vb, b_args, b_kinds} = operand_or_immediate(tag, type, shape, verify, costly)

    # Now and then, b a view of a type that type's binary kernels read
    # directly (for a float type an integer type or a narrower float type,
    # for an integer type one all of whose values it holds), on either side.
    {vb, b_args, b_kinds} =
      with true <- not verify and not costly and chance(0.1),
           [_ | _] = us <- mixed_types(type) do
        v = tag |> make_view(pick(us), shape) |> Map.put(:imm, false)
        {v, view_args(v), view_kinds(v)}
      else
        _ -> {vb, b_args, b_kinds}
      end

    swap = (vb.imm or vb.t.type != type) and chance(0.5)

    {args, kinds} =
      if swap,
        do: {b_args ++ view_args(va), b_kinds ++ view_kinds(va)},
        else: {view_args(va) ++ b_args, view_kinds(va) ++ b_kinds}

    mk(
      :binary,
      [op, shape | args],
      [{:op, @binary_ops}, :shape | kinds],
      fn ref ->
        expected =
          if verify and va.t.data != nil and vb.t.data != nil and
               (type == :s32 or (va.t.nice and vb.t.nice)) do
            f = if op == :add, do: &Kernel.+/2, else: &Kernel.*/2

            Enum.zip(view_elems(va, shape), view_elems(vb, shape))
            |> Enum.map(fn {x, y} -> enc(type, f.(dec(type, x), dec(type, y))) end)
            |> IO.iodata_to_binary()
          end

        expect_tensor(ref, tag, type, n, expected)
      end,
      supported?(tag, :binary, op, type)
    )
  end

  # The types whose operands the binary kernels of type read directly.
  defp mixed_types(type) when type in [:f16, :bf16], do: @ints
  defp mixed_types(:f32), do: @ints ++ [:f16, :bf16]

  defp mixed_types(type) when type in @ints do
    for u <- @ints,
        u != type,
        es(u) < es(type),
        u in @uints or type in @sints,
        do: u
  end

  defp mixed_types(_type), do: []

  # The second operand of binary/8 and compare/8: a view (imm: false), or
  # in a quarter of the calls an immediate scalar, a nice value given as
  # one element's bytes; {operand, its
  # three arguments, their kinds}. view_elems/2 reads an immediate as that
  # value repeated.
  defp operand_or_immediate(tag, type, shape, verify, costly) do
    # (c128's 16 bytes are refused: no immediates for it.)
    if es(type) <= 8 and chance(0.25) do
      bytes = enc(type, nice_value(type))
      t = %{ref: nil, dev: tag, type: type, count: 1, data: bytes, nice: true}
      v = %{t: t, offset: 0, strides: nil, resolved: List.duplicate(0, length(shape)), imm: true}
      {v, [bytes, 0, nil], [{:binary, type}, :i64, {:strides, length(shape)}]}
    else
      v = make_view(tag, type, shape, nice: verify and type == :f32, dense: costly)
      {Map.put(v, :imm, false), view_args(v), view_kinds(v)}
    end
  end

  defp g_compare do
    tag = op_tag()
    type = pick(@cheap_types)
    op = weighted([{pick(@cheap_compare), 200}, {pick(@compare_ops), 1}])
    shape = rand_shape()
    va = make_view(tag, type, shape)
    {vb, b_args, b_kinds} = operand_or_immediate(tag, type, shape, false, false)

    {args, kinds} =
      if vb.imm and chance(0.5),
        do: {b_args ++ view_args(va), b_kinds ++ view_kinds(va)},
        else: {view_args(va) ++ b_args, view_kinds(va) ++ b_kinds}

    mk(
      :compare,
      [op, shape | args],
      [{:op, @compare_ops}, :shape | kinds],
      fn ref -> expect_tensor(ref, tag, :u8, prod(shape), nil) end,
      supported?(tag, :compare, op, type)
    )
  end

  defp g_select do
    tag = op_tag()
    type = pick(@cheap_types)
    shape = rand_shape()
    vp = make_view(tag, :u8, shape)
    va = make_view(tag, type, shape)
    vb = make_view(tag, type, shape)

    mk(
      :select,
      [shape | view_args(vp) ++ view_args(va) ++ view_args(vb)],
      [:shape | view_kinds(vp) ++ view_kinds(va) ++ view_kinds(vb)],
      fn ref -> expect_tensor(ref, tag, type, prod(shape), nil) end
    )
  end

  defp g_convert do
    tag = op_tag()
    costly = chance(0.05)

    {from, to} =
      cond do
        costly and chance(0.5) -> {pick(@costly), pick([:f32, :s32])}
        costly -> {pick([:f32, :s32]), pick(@costly)}
        true -> {pick(@cheap_types), pick(@cheap_types)}
      end

    to = if chance(0.3), do: from, else: to
    shape = rand_shape()
    v = make_view(tag, from, shape, nice: chance(0.8), dense: costly)

    mk(:convert, [to, shape | view_args(v)], [:dtype, :shape | view_kinds(v)], fn ref ->
      expected =
        if v.t.data != nil and v.t.nice,
          do: for(e <- view_elems(v, shape), into: <<>>, do: convert(from, to, dec(from, e)))

      expect_tensor(ref, tag, to, prod(shape), expected)
    end)
  end

  # Conversion of a nice value (integers, float or complex parts of
  # integer value).
  defp convert(_from, to, v) when to in @complex do
    {re, im} = if is_tuple(v), do: v, else: {v, 0}
    enc(to, {re * 1.0, im * 1.0})
  end

  defp convert(_from, to, v) when to in @floats, do: enc(to, real_part(v) * 1.0)

  defp convert(from, to, v) when from in @ints, do: enc(to, v)

  defp convert(_from, to, v) do
    x = trunc(real_part(v))
    bits = es(to) * 8

    {lo, hi} =
      if to in @sints,
        do: {-(1 <<< (bits - 1)), (1 <<< (bits - 1)) - 1},
        else: {0, (1 <<< bits) - 1}

    enc(to, x |> max(lo) |> min(hi))
  end

  # Axes of a reduction over rank: a random subset, sometimes repeated.
  defp rand_axes(rank) do
    axes = for i <- 0..(rank - 1)//1, chance(0.5), do: i
    axes = if axes != [] and chance(0.1), do: [hd(axes) | axes], else: axes
    Enum.shuffle(axes)
  end

  defp g_reduce do
    tag = op_tag()
    verify = chance(0.5)

    costly = verify and chance(0.05)

    # Sums and products of 8- to 32-bit integers into 64 bits, half the time.
    widen = chance(0.5)

    type =
      cond do
        costly -> pick(@costly)
        verify and widen -> pick([:s8, :s16, :s32, :u8, :u16, :u32])
        verify -> pick([:s32, :s64, :u32, :u64, :f32])
        true -> pick(@cheap_types)
      end

    op = if verify, do: :sum, else: pick(@reduce_ops)
    out_type = if widen and op in [:sum, :product], do: widened(type), else: type
    shape = rand_shape()
    axes = rand_axes(length(shape))
    v = make_view(tag, type, shape, nice: verify, dense: costly)
    kept = for {d, i} <- Enum.with_index(shape), i not in axes, do: d

    mk(
      :reduce,
      [op, shape | view_args(v)] ++ [axes, out_type],
      [{:op, @reduce_ops}, :shape | view_kinds(v)] ++ [{:axes, length(shape)}, :dtype],
      fn ref ->
        expected = if verify and v.t.nice, do: sum_ref(type, out_type, shape, axes, v, kept)
        expect_tensor(ref, tag, out_type, prod(kept), expected)
      end,
      type not in @complex or op in [:sum, :product]
    )
  end

  defp widened(t) when t in [:s8, :s16, :s32], do: :s64
  defp widened(t) when t in [:u8, :u16, :u32], do: :u64
  defp widened(t), do: t

  defp sum_ref(type, out_type, shape, axes, v, kept) do
    values = Enum.map(view_elems(v, shape), &dec(type, &1))

    zero =
      cond do
        type in @complex -> {0.0, 0.0}
        type in @floats -> 0.0
        true -> 0
      end

    # Sums start from +0, as Nx.BinaryBackend's and XLA's do: the sum of a
    # single -0.0 is +0.0.
    sums =
      Enum.zip(coords(shape), values)
      |> Enum.reduce(%{}, fn {c, x}, acc ->
        key = for {i, k} <- Enum.with_index(c), k not in axes, do: i
        Map.update(acc, key, add(zero, x), &add(&1, x))
      end)

    for c <- coords(kept), into: <<>>, do: enc(out_type, Map.get(sums, c, zero))
  end

  defp add({a, b}, {c, d}), do: {a + c, b + d}
  defp add(a, b), do: a + b

  defp g_argreduce do
    tag = op_tag()
    type = pick(@cheap_reals)
    shape = rand_shape()
    axes = rand_axes(length(shape))
    v = make_view(tag, type, shape)
    kept = for {d, i} <- Enum.with_index(shape), i not in axes, do: d
    op = pick([:argmax, :argmin])

    mk(
      :argreduce,
      [op, chance(0.5), shape | view_args(v)] ++ [axes],
      [{:choice, [:argmax, :argmin]}, :bool, :shape | view_kinds(v)] ++ [{:axes, length(shape)}],
      fn ref -> expect_tensor(ref, tag, :s64, prod(kept), nil) end
    )
  end

  defp g_transpose do
    tag = op_tag()
    type = pick(@cheap_types)
    shape = rand_shape(max_dim: 4)
    perm = Enum.shuffle(Enum.to_list(0..(length(shape) - 1)//1))
    n = prod(shape)
    t = tensor_of(tag, type, n, nice: type not in @ints)

    mk(
      :transpose,
      [shape, t.ref, perm],
      [:shape, {:tensor, tag}, {:perm, length(shape)}],
      fn ref ->
        expected =
          if t.data != nil and (type in @ints or t.nice) do
            s = dense_strides(shape)
            v = %{t: t, offset: 0, resolved: Enum.map(perm, &Enum.at(s, &1))}
            IO.iodata_to_binary(view_elems(v, Enum.map(perm, &Enum.at(shape, &1))))
          end

        expect_tensor(ref, tag, type, n, expected)
      end
    )
  end

  # copy_into: an empty destination written once per element (through the
  # strides of a transposed layout), from a view converted on the way.
  defp g_copy_into do
    {tag, to, count, args, kinds, verify} = copy_into_parts()
    dst = setup_call(:empty, [dev(tag), to, count])
    remember(:scratch, %{ref: dst, dev: tag, type: to, count: count, data: nil, nice: false})

    mk(:copy_into, [dst | args], [{:tensor_dst, tag} | kinds], fn
      :ok -> verify.(dst)
      other -> {:fail, "copy_into returned #{inspect(other)}"}
    end)
  end

  # A copy_into/7 call but its destination (a fresh tensor of count
  # elements of type to on device tag): {tag, to, count, the other
  # arguments, their kinds, a check of the destination after the copy}.
  defp copy_into_parts do
    tag = op_tag()
    from = pick(@cheap_types)
    to = if chance(0.6), do: from, else: pick(@cheap_types)
    shape = rand_shape(max_dim: 4)
    rank = length(shape)
    n = prod(shape)
    v = make_view(tag, from, shape, nice: true)
    perm = Enum.shuffle(Enum.to_list(0..(rank - 1)//1))
    layout = dense_strides(Enum.map(perm, &Enum.at(shape, &1)))
    # stride of axis k: that of its position in the permuted layout
    dst_strides =
      for k <- 0..(rank - 1)//1, do: Enum.at(layout, Enum.find_index(perm, &(&1 == k)))

    extra = rand(3)
    doff = rand(extra + 1)

    verify = fn dst ->
      if v.t.data != nil and v.t.nice do
        got = List.to_tuple(elems(setup_call(:download, [dst, 0, n + extra]), to))
        want = Enum.map(view_elems(v, shape), &convert(from, to, dec(from, &1)))
        written = for c <- coords(shape), do: elem(got, doff + dot(c, dst_strides))

        if written == want,
          do: :verified,
          else:
            {:fail,
             "copy_into wrote #{inspect(Enum.map(written, &dec(to, &1)), limit: 16)}, expected #{inspect(Enum.map(want, &dec(to, &1)), limit: 16)}"}
      else
        :unverified
      end
    end

    {tag, to, n + extra, [doff, dst_strides, shape | view_args(v)],
     [:i64, {:ilist, rank}, :shape | view_kinds(v)], verify}
  end

  # copy_into/7 in a plan: the plan makes its destination with empty/3
  # and returns it, so the check reads what the replay wrote.
  defp g_copy_into_fresh do
    {tag, to, count, args, kinds, verify} = copy_into_parts()

    %{
      mk(:copy_into, args, [{:device, tag} | kinds], fn ref -> verify.(ref) end)
      | fun: :copy_into_fresh
    }
    |> Map.put(:empty, [dev(tag), to, count])
  end

  # A few fixed programs (each distinct program is a pipeline of its own):
  # {program, inputs}. The first, (a * b) - a, is checked.
  defp programs do
    mul = 1 ||| 2 <<< 2 ||| 0 <<< 9 ||| 1 <<< 16
    sub = 1 ||| 1 <<< 2 ||| 2 <<< 9 ||| 0 <<< 16
    neg = 0 ||| 1 <<< 2 ||| 0 <<< 9
    add = 1 ||| 0 <<< 2 ||| 0 <<< 9 ||| 1 <<< 16
    abs = 0 ||| 2 <<< 2 ||| 2 <<< 9
    less = 2 ||| 2 <<< 2 ||| 0 <<< 9 ||| 1 <<< 16
    sel = 3 ||| 2 <<< 9 ||| 0 <<< 16 ||| 1 <<< 23
    [{[mul, sub], 2}, {[neg], 1}, {[add, abs], 2}, {[less, sel], 2}]
  end

  defp g_fused do
    {tag, type, shape, args, kinds, expected} = fused_parts()

    mk(:fused, args, kinds, fn ref ->
      expect_tensor(ref, tag, type, prod(shape), expected.())
    end)
  end

  # fused_into: the program's result written into a block of an empty
  # destination (after a few elements, a few left after it).
  defp g_fused_into do
    {tag, type, shape, args, kinds, expected} = fused_parts()
    n = prod(shape)
    doff = rand(4)
    count = doff + n + rand(3)
    dst = setup_call(:empty, [dev(tag), type, count])
    remember(:scratch, %{ref: dst, dev: tag, type: type, count: count, data: nil, nice: false})

    mk(:fused_into, [dst, doff | args], [{:tensor_dst, tag}, :i64 | kinds], fn
      :ok ->
        case expected.() do
          nil ->
            :unverified

          want ->
            got = fetch(dst, doff, n)

            cond do
              got == :device_failed and tag == :v -> :unverified
              got == want -> :verified
              true -> {:fail, "fused_into wrote #{show(type, got)}, expected #{show(type, want)}"}
            end
        end

      other ->
        {:fail, "fused_into returned #{inspect(other)}"}
    end)
  end

  # fused_pair: x * y - x and x * y (register 2) from one program, each
  # into a new tensor or a block of an empty destination (the two blocks
  # of one destination apart).
  defp g_fused_pair do
    {tag, type, shape, [_type, _shape, program, inputs], [_, _, _, views], expected} =
      fused_parts(:pair)

    n = prod(shape)

    dests =
      for _ <- 1..2 do
        if chance(0.5) do
          nil
        else
          doff = rand(4)
          count = doff + n + rand(3)
          dst = setup_call(:empty, [dev(tag), type, count])

          remember(:scratch, %{
            ref: dst,
            dev: tag,
            type: type,
            count: count,
            data: nil,
            nice: false
          })

          {dst, doff}
        end
      end

    {dest_args, dest_kinds} =
      dests
      |> Enum.map(fn
        nil -> {[nil, 0], [:any, :i64]}
        {dst, doff} -> {[dst, doff], [{:opt_dst, tag}, :i64]}
      end)
      |> Enum.unzip()

    args = [type, shape, program, 2, inputs] ++ Enum.concat(dest_args)
    kinds = [:dtype, :shape, :program, :u32, views] ++ Enum.concat(dest_kinds)

    mk(:fused_pair, args, kinds, fn
      result when is_tuple(result) ->
        fresh = Tuple.to_list(result)

        got =
          dests
          |> Enum.zip([0, 1])
          |> Enum.map_reduce(fresh, fn
            {nil, _k}, [ref | rest] -> {fetch(ref, 0, n), rest}
            {{dst, doff}, _k}, rest -> {fetch(dst, doff, n), rest}
            {nil, _k}, [] -> {:missing, []}
          end)
          |> elem(0)

        case expected.() do
          nil ->
            :unverified

          {want0, want1} ->
            cond do
              length(fresh) != Enum.count(dests, &is_nil/1) ->
                {:fail, "fused_pair returned #{length(fresh)} tensors"}

              :device_failed in got and tag == :v ->
                :unverified

              got == [want0, want1] ->
                :verified

              true ->
                {:fail, "fused_pair gave #{inspect(Enum.map(got, &show(type, &1)))}"}
            end
        end

      other ->
        {:fail, "fused_pair returned #{inspect(other)}"}
    end)
  end

  # A fused/4 call's parts: {tag, type, shape, its arguments, their kinds,
  # a function giving the expected result's bytes, or nil where the
  # program or an input is not checked}.
  # fused_parts(:pair): the first program's, with a second result (its
  # product, register 2), prepared by fused_program/4 or a list; its
  # expected bytes a pair {x * y - x, x * y}.
  defp fused_parts(kind \\ :single) do
    tag = op_tag()
    type = :f32

    {program, ninputs} =
      if kind == :pair, do: hd(programs()), else: weighted(Enum.zip(programs(), [6, 2, 1, 1]))

    checked = program == elem(hd(programs()), 0) and type == :f32
    shape = rand_shape()
    views = for _ <- 1..ninputs, do: make_view(tag, type, shape, nice: checked)
    inputs = for v <- views, do: {v.t.ref, v.offset, v.strides}

    # The program prepared (fused_program/3, /4) instead of its list.
    program =
      cond do
        not chance(0.3) -> program
        kind == :pair -> NIF.fused_program(type, ninputs, program, 2)
        true -> NIF.fused_program(type, ninputs, program)
      end

    # The second input of x * y - x as an immediate (one f32's bytes).
    imm = if checked and chance(0.3), do: pick([0.5, -2.0, 3.0, 0.25])
    inputs = if imm, do: List.replace_at(inputs, 1, enc(:f32, imm)), else: inputs
    read = if imm, do: [hd(views)], else: views
    # The devices of the inputs; an immediate has none (nil).
    tags = Enum.map(views, & &1.t.dev)
    tags = if imm, do: List.replace_at(tags, 1, nil), else: tags

    expected = fn ->
      if checked and Enum.all?(read, & &1.t.nice) do
        [a | b] = for v <- read, do: Enum.map(view_elems(v, shape), &dec(:f32, &1))
        b = if imm, do: List.duplicate(imm, length(a)), else: hd(b)
        diff = for {x, y} <- Enum.zip(a, b), into: <<>>, do: enc(:f32, x * y - x)

        if kind == :pair,
          do: {diff, for({x, y} <- Enum.zip(a, b), into: <<>>, do: enc(:f32, x * y))},
          else: diff
      end
    end

    {tag, type, shape, [type, shape, program, inputs],
     [:dtype, :shape, :program, {:views, tags, length(shape)}], expected}
  end

  # ------------------------------------------------------------------
  # Plans (replay/2)
  # ------------------------------------------------------------------

  # The NIFs a plan may call.
  @replayable ~w(upload deallocate deallocate_many tensor_info copy empty reinterpret
                 copy_into binary fused fused_into fused_pair unary compare select convert
                 reduce argreduce
                 gather scatter sort window_reduce conv window_scatter transpose matmul
                 fill iota fft cholesky lu qr eigh_iterate triangular_solve)a

  # The first program prepared with a second result (register 2).
  defp g_fused_program_pair do
    {program, ninputs} = hd(programs())

    mk(:fused_program, [:f32, ninputs, program, 2], [:dtype, :u32, :program, :u32], fn
      ref when is_reference(ref) -> :verified
      other -> {:fail, "fused_program returned #{inspect(other)}"}
    end)
  end

  # A program checked on a device, of one result or (the first program)
  # of two: :ok, nothing queued.
  defp g_fused_check do
    {program, ninputs} = pick(programs())
    second = if ninputs == 2 and length(program) == 2 and chance(0.5), do: 2, else: 0

    dev_call(
      :fused_check,
      [:f32, ninputs, program, second],
      [:dtype, :u32, :program, :u32],
      fn
        :ok -> :verified
        other -> {:fail, "fused_check returned #{inspect(other)}"}
      end
    )
  end

  # A program prepared for its input count: a handle fused/4 takes.
  defp g_fused_program do
    {program, ninputs} = pick(programs())

    mk(:fused_program, [:f32, ninputs, program], [:dtype, :u32, :program], fn
      ref when is_reference(ref) -> :verified
      other -> {:fail, "fused_program returned #{inspect(other)}"}
    end)
  end

  # Counts of replayed ops: non-negative and never behind the last reading.
  defp g_replay_counts do
    mk(:replay_counts, [], [], fn
      {d, n} = counts when is_integer(d) and is_integer(n) and d >= 0 and n >= 0 ->
        {d0, n0} = Process.get(:last_replay_counts, {0, 0})
        Process.put(:last_replay_counts, counts)

        if d >= d0 and n >= n0,
          do: :verified,
          else: {:fail, "replay_counts #{inspect(counts)} after #{inspect({d0, n0})}"}

      other ->
        {:fail, "replay_counts returned #{inspect(other)}"}
    end)
  end

  defp g_replay_index do
    {name, arity} =
      if chance(0.8),
        do: pick(NIF.__info__(:functions) -- [load_nif: 0]),
        else: {pick([:nope, :binary, :fused, :replay]), rand(13)}

    exported? = {name, arity} in NIF.__info__(:functions)

    mk(:replay_index, [name, arity], [:any, :any], fn
      i when is_integer(i) and i >= 0 ->
        if name in @replayable and exported?,
          do: :verified,
          else: {:fail, "replay_index(#{name}, #{arity}) = #{i}, expected nil"}

      nil ->
        if name in @replayable and exported?,
          do: {:fail, "replay_index(#{name}, #{arity}) = nil, expected an index"},
          else: :verified

      other ->
        {:fail, "replay_index returned #{inspect(other)}"}
    end)
  end

  # The generators of replayable calls with one tensor result.
  defp replay_subs do
    [
      &g_binary/0,
      &g_unary/0,
      &g_fused/0,
      &g_compare/0,
      &g_select/0,
      &g_convert/0,
      &g_reduce/0,
      &g_copy/0,
      &g_reinterpret/0,
      &g_transpose/0,
      &g_fill/0,
      &g_iota/0,
      &g_empty/0,
      &g_copy_into_fresh/0
    ]
  end

  # A plan of one to four valid calls of those generators, their tensors
  # and devices passed as parameters and their other arguments as
  # constants, lists and tuples built by the plan, or views; now and then
  # a result copied by a later op that frees it. Each result is judged by
  # its own call's check.
  defp g_replay do
    subs = for _ <- 1..range(1, 4), do: pick(replay_subs()).()
    copy = NIF.replay_index(:copy, 1)

    {ops, params, outputs, next} =
      Enum.reduce(subs, {[], [], [], 0}, fn
        %{fun: :copy_into_fresh} = sub, {ops, params, outputs, next} ->
          # s(next) = empty(...); copy_into(s(next), ...), which returns
          # no tensor; s(next) is the output
          {especs, params} = Enum.map_reduce(sub.empty, params, &plan_spec/2)
          {specs, params} = Enum.map_reduce(sub.args, params, &plan_spec/2)
          empty = {:empty, NIF.replay_index(:empty, 3), List.to_tuple(especs), {next}, {}}

          copy =
            {:copy_into, NIF.replay_index(:copy_into, 7), List.to_tuple([{:s, next} | specs]), {},
             {}}

          {[copy, empty | ops], params, [next | outputs], next + 1}

        sub, {ops, params, outputs, next} ->
          {specs, params} = Enum.map_reduce(sub.args, params, &plan_spec/2)
          index = NIF.replay_index(sub.fun, length(sub.args))
          op = {sub.fun, index, List.to_tuple(specs), {next}, {}}

          if chance(0.3) do
            again = {:copy, copy, {{:s, next}}, {next + 1}, {next}}
            {[again, op | ops], params, [next + 1 | outputs], next + 2}
          else
            {[op | ops], params, [next | outputs], next + 1}
          end
      end)

    plan =
      {next, ops |> Enum.reverse() |> List.to_tuple(),
       outputs |> Enum.reverse() |> List.to_tuple()}

    n = length(subs)

    mk(
      :replay,
      [plan, List.to_tuple(params)],
      [:plan, :params],
      fn
        result when is_tuple(result) and tuple_size(result) == n ->
          verdicts =
            Enum.zip_with(subs, Tuple.to_list(result), fn sub, ref -> sub.check.(ref) end)

          Enum.find(verdicts, &match?({:fail, _}, &1)) ||
            if(Enum.all?(verdicts, &(&1 == :verified)), do: :verified, else: :unverified)

        other ->
          {:fail, "replay returned #{inspect(other, limit: 8)}, expected #{n} tensors"}
      end,
      Enum.all?(subs, &strict?/1)
    )
  end

  # The spec of an argument: references are parameters (so that a plan
  # reads every parameter); views, lists and tuples are at times built by
  # the plan, always where they hold a reference.
  defp plan_spec(term, params) when is_reference(term),
    do: {{:p, length(params)}, params ++ [term]}

  defp plan_spec({t, off, strides} = term, params) when is_reference(t) do
    if chance(0.5) do
      {spec, params} = plan_spec(t, params)
      {{:v, spec, off, strides}, params}
    else
      plan_spec_tuple(term, params)
    end
  end

  defp plan_spec(term, params) when is_list(term) and term != [] and length(term) <= 64 do
    if chance(0.5) or has_ref?(term) do
      {specs, params} = Enum.map_reduce(term, params, &plan_spec/2)
      {{:l, List.to_tuple(specs)}, params}
    else
      {{:c, term}, params}
    end
  end

  defp plan_spec(term, params) when is_tuple(term) and tuple_size(term) in 1..64,
    do: plan_spec_tuple(term, params)

  defp plan_spec(term, params), do: {{:c, term}, params}

  defp has_ref?(term) when is_reference(term), do: true
  defp has_ref?(term) when is_list(term), do: Enum.any?(term, &has_ref?/1)
  defp has_ref?(term) when is_tuple(term), do: has_ref?(Tuple.to_list(term))
  defp has_ref?(_term), do: false

  defp plan_spec_tuple(term, params) do
    {specs, params} = term |> Tuple.to_list() |> Enum.map_reduce(params, &plan_spec/2)
    {{:t, List.to_tuple(specs)}, params}
  end

  # ------------------------------------------------------------------
  # Indexing, sorting, windows, convolution, FFT, matmul
  # ------------------------------------------------------------------

  defp g_gather do
    tag = op_tag()
    type = pick(@cheap_types)
    shape = rand_shape(rank: range(0, 3), max_dim: 4, min_dim: 1)
    depth = rand(3)
    adims = for _ <- 1..depth//1, do: range(1, 4)
    astr = for _ <- 1..depth//1, do: range(-3, 3)
    sstr = for _ <- shape, do: range(-2, 2)
    {lo1, hi1} = span(shape, sstr)
    {lo2, hi2} = span(adims, astr)
    off = -(lo1 + lo2)
    src = tensor_of(tag, type, off + hi1 + hi2 + 1, exact: false)
    istr = Enum.map(dense_strides(shape), &(&1 * depth))
    n = prod(shape)
    idx_data = for _ <- 1..(n * depth)//1, into: <<>>, do: enc(:s64, range(-2, 5))

    idx =
      if depth == 0 and chance(0.5),
        do: tensor_of(tag, :s64, rand(4), exact: false),
        else: upload_meta(tag, :s64, idx_data)

    mk(
      :gather,
      [src.ref, off, idx.ref, shape, sstr, istr, adims, astr],
      [
        {:tensor, tag},
        :i64,
        {:tensor, tag},
        :shape,
        {:ilist, length(shape)},
        {:ilist, length(shape)},
        {:ilist, depth},
        {:ilist, depth}
      ],
      fn ref -> expect_tensor(ref, tag, type, n, nil) end
    )
  end

  defp upload_meta(tag, type, data) do
    ref = setup_call(:upload, [dev(tag), type, data])
    n = div(byte_size(data), es(type))

    remember(:known, %{
      ref: ref,
      dev: tag,
      type: type,
      count: n,
      data: data,
      nice: nice?(type, data)
    })
  end

  defp g_scatter do
    tag = op_tag()
    type = pick(@cheap_types)
    count = rand(4)
    slice = rand_shape(rank: rand(3), max_dim: 3, min_dim: 1)
    depth = rand(3)
    adims = for _ <- 1..depth//1, do: range(1, 4)
    astr = for _ <- 1..depth//1, do: range(0, 3)
    dstr = for _ <- slice, do: range(0, 3)
    {_, hi1} = span(slice, dstr)
    {_, hi2} = span(adims, astr)
    dst = scratch(tag, type, hi1 + hi2 + 1 + rand(2))
    upd = tensor_of(tag, type, count * prod(slice), exact: false)

    idx =
      upload_meta(
        tag,
        :s64,
        for(_ <- 1..(count * depth)//1, into: <<>>, do: enc(:s64, range(-1, 5)))
      )

    op = pick([:put, :add])

    mk(
      :scatter,
      [op, dst.ref, upd.ref, idx.ref, count, slice, dstr, adims, astr],
      [
        {:choice, [:put, :add]},
        {:tensor_dst, tag},
        {:tensor, tag},
        {:tensor, tag},
        :u64,
        :shape,
        {:ilist, length(slice)},
        {:ilist, depth},
        {:ilist, depth}
      ],
      &ok_result/1
    )
  end

  defp g_sort do
    tag = op_tag()
    type = pick(@cheap_reals)

    t =
      if chance(0.1),
        do: tensor_of(tag, type, 0),
        else: find(tag, &(&1.type == type)) || tensor_of(tag, type, rand(30))

    c = t.count
    rows = if c == 0, do: rand(3), else: pick(for(r <- 1..c, rem(c, r) == 0, do: r))
    len = if c == 0, do: if(rows == 0, do: rand(5), else: 0), else: div(c, rows)
    want = pick([:values, :indices, :both])

    mk(
      :sort,
      [t.ref, rows, len, chance(0.5), want],
      [{:tensor, tag}, :u64, :u64, :bool, {:choice, [:values, :indices, :both]}],
      fn
        {v, i} when want == :both ->
          case expect_tensor(v, tag, type, c, nil) do
            {:fail, _} = f -> f
            _ -> expect_tensor(i, tag, :s64, c, nil)
          end

        r when want == :values ->
          expect_tensor(r, tag, type, c, nil)

        r ->
          expect_tensor(r, tag, :s64, c, nil)
      end
    )
  end

  defp g_window_reduce do
    tag = op_tag()
    type = pick(@cheap_reals)
    shape = rand_shape(rank: range(0, 3), max_dim: 5, min_dim: 1)
    window = for _ <- shape, do: range(1, 3)
    strides = for _ <- shape, do: range(1, 2)
    dil = for _ <- shape, do: range(1, 2)
    lo = for _ <- shape, do: rand(2)
    hi = for _ <- shape, do: rand(2)

    out =
      for {d, w, s, dl, l, h} <- Enum.zip([shape, window, strides, dil, lo, hi]),
          do: max(0, div(d + l + h - ((w - 1) * dl + 1), s) + 1)

    a = tensor_of(tag, type, prod(shape))

    mk(
      :window_reduce,
      [pick(@reduce_ops), a.ref, shape, out, window, strides, dil, lo],
      [
        {:op, @reduce_ops},
        {:tensor, tag},
        :shape,
        :shape,
        {:ilist, length(shape)},
        {:ilist, length(shape)},
        {:ilist, length(shape)},
        {:ilist, length(shape)}
      ],
      fn ref -> expect_tensor(ref, tag, type, prod(out), nil) end
    )
  end

  defp g_window_scatter do
    tag = op_tag()
    ta = pick(@cheap_reals)
    t = if chance(0.7), do: ta, else: pick(@cheap_reals)
    shape = rand_shape(rank: range(0, 3), max_dim: 5, min_dim: 1)
    window = for _ <- shape, do: range(1, 3)
    strides = for _ <- shape, do: range(1, 2)
    lo = for _ <- shape, do: range(-1, 1)
    hi = for _ <- shape, do: range(-1, 1)

    windows =
      for {d, w, s, l, h} <- Enum.zip([shape, window, strides, lo, hi]) do
        p = d + l + h
        if p >= w, do: div(p - w, s) + 1, else: 0
      end

    a = tensor_of(tag, ta, prod(shape))
    source = tensor_of(tag, t, prod(windows))
    init = tensor_of(tag, t, 1)

    mk(
      :window_scatter,
      [pick([:max, :min]), a.ref, source.ref, init.ref, shape, window, strides, lo, hi],
      [
        {:choice, [:max, :min]},
        {:tensor, tag},
        {:tensor, tag},
        {:tensor, tag},
        :shape,
        {:ilist, length(shape)},
        {:ilist, length(shape)},
        {:ilist, length(shape)},
        {:ilist, length(shape)}
      ],
      fn ref -> expect_tensor(ref, tag, t, prod(shape), nil) end
    )
  end

  defp g_conv do
    tag = op_tag()
    type = pick(@cheap_reals)
    s = rand(3)
    {fg, bg} = pick([{1, 1}, {2, 1}, {1, 2}])
    ck = range(1, 2)
    c = ck * fg
    o = fg * bg * range(1, 2)
    nb = bg * range(1, 2)
    sp = for _ <- 1..s//1, do: range(1, 5)
    ks = for _ <- 1..s//1, do: range(1, 3)
    strides = for _ <- 1..s//1, do: range(1, 2)
    plo = for _ <- 1..s//1, do: range(-1, 1)
    phi = for _ <- 1..s//1, do: range(-1, 1)
    idil = for _ <- 1..s//1, do: range(1, 2)
    kdil = for _ <- 1..s//1, do: range(1, 2)

    outs =
      for {d, k, st, l, h, id, kd} <- Enum.zip([sp, ks, strides, plo, phi, idil, kdil]) do
        padded = l + (d - 1) * id + 1 + h
        taps = (k - 1) * kd + 1
        if padded >= taps, do: div(padded - taps, st) + 1, else: 0
      end

    in_shape = [nb, c | sp]
    k_shape = [o, ck | ks]
    out_shape = [div(nb, bg), o | outs]
    input = tensor_of(tag, type, prod(in_shape))
    kernel = tensor_of(tag, type, prod(k_shape))

    mk(
      :conv,
      [
        input.ref,
        kernel.ref,
        in_shape,
        k_shape,
        out_shape,
        strides,
        plo,
        phi,
        idil,
        kdil,
        fg,
        bg
      ],
      [{:tensor, tag}, {:tensor, tag}, :shape, :shape, :shape] ++
        List.duplicate({:ilist, s}, 5) ++ [:i64, :i64],
      fn ref -> expect_tensor(ref, tag, type, prod(out_shape), nil) end
    )
  end

  defp g_fft do
    tag = op_tag()
    type = pick(@complex)
    rows = rand(4)
    n = range(1, 12)
    t = tensor_of(tag, type, rows * n)
    eps = pick([0.0, 1.0e-7, 1.0e-3])

    mk(
      :fft,
      [t.ref, rows, n, chance(0.5), eps],
      [{:tensor, tag}, :u64, :u64, :bool, :float],
      fn ref -> expect_tensor(ref, tag, type, rows * n, nil) end
    )
  end

  # Linear algebra takes f32 and f64 (f64 rarely: its kernels compile
  # slowly on a CPU device); other types must raise. Orders and right-hand
  # sides reach the kernels' larger forms (Cholesky above 64, solves above
  # 128 or with more than 4 rows an invocation) now and then.
  defp linalg_type, do: weighted([{:f32, 8}, {:f64, 1}, {pick(@cheap_types -- [:f32]), 1}])

  # A batch of square matrices for cholesky/4 and lu/4: {tag, type, n,
  # batch, tensor, eps}, orders reaching past 64 now and then.
  defp square_batch do
    tag = op_tag()
    type = linalg_type()
    n = weighted([{0, 1}, {range(1, 8), 6}, {range(62, 70), 1}])
    batch = weighted([{0, 1}, {range(1, 3), 6}])
    {tag, type, n, batch, tensor_of(tag, type, batch * n * n), pick([0.0, 1.0e-10, 1.0e-3])}
  end

  defp g_cholesky do
    {tag, type, n, batch, t, eps} = square_batch()

    mk(
      :cholesky,
      [t.ref, batch, n, eps],
      [{:tensor, tag}, :u64, :u64, :float],
      fn ref -> expect_tensor(ref, tag, type, batch * n * n, nil) end,
      type in [:f32, :f64]
    )
  end

  # LU: orders past 64 take the panels (65-70: a last panel of 1-6
  # columns).
  defp g_lu do
    {tag, type, n, batch, t, eps} = square_batch()

    mk(
      :lu,
      [t.ref, batch, n, eps],
      [{:tensor, tag}, :u64, :u64, :float],
      fn
        {p, l, u} ->
          expect_tensors([{p, batch * n * n}, {l, batch * n * n}, {u, batch * n * n}], tag, type)

        other ->
          {:fail, "lu returned #{inspect(other, limit: 8)}"}
      end,
      type in [:f32, :f64]
    )
  end

  # QR: m x n matrices, tall and wide, past 64 rows or columns (a dispatch
  # a reflection) now and then; Q m x m and R m x n when complete, else
  # m x k and k x n.
  defp g_qr do
    tag = op_tag()
    type = linalg_type()
    [m, n] = for _ <- 1..2, do: weighted([{0, 1}, {range(1, 8), 6}, {range(62, 70), 1}])
    batch = weighted([{0, 1}, {range(1, 3), 6}])
    complete = chance(0.5)
    t = tensor_of(tag, type, batch * m * n)
    k = if complete, do: m, else: min(m, n)

    mk(
      :qr,
      [t.ref, batch, m, n, complete, pick([0.0, 1.0e-10, 1.0e-3])],
      [{:tensor, tag}, :u64, :u64, :u64, :bool, :float],
      fn
        {q, r} -> expect_tensors([{q, batch * m * k}, {r, batch * k * n}], tag, type)
        other -> {:fail, "qr returned #{inspect(other, limit: 8)}"}
      end,
      type in [:f32, :f64]
    )
  end

  # eigh's QR iteration: square matrices up to order 64 (the kernel's
  # largest), Q given or nil (A reduced to tridiagonal form first), few
  # steps.
  defp g_eigh_iterate do
    tag = op_tag()
    type = linalg_type()
    n = weighted([{0, 1}, {range(1, 8), 6}, {range(60, 64), 1}])
    batch = weighted([{0, 1}, {range(1, 3), 6}])
    a = tensor_of(tag, type, batch * n * n)

    {q, q_kind} =
      if chance(0.5),
        do: {nil, :any},
        else: {tensor_of(tag, type, batch * n * n).ref, {:opt_tensor, tag}}

    mk(
      :eigh_iterate,
      [a.ref, q, batch, n, range(0, 12), pick([0.0, 1.0e-4, 1.0e-2])],
      [{:tensor, tag}, q_kind, :u64, :u64, :u64, :float],
      fn
        {ra, rq} ->
          expect_tensors([{ra, batch * n * n}, {rq, batch * n * n}], tag, type)

        other ->
          {:fail, "eigh_iterate returned #{inspect(other, limit: 8)}"}
      end,
      type in [:f32, :f64]
    )
  end

  # Each {ref, count} a live tensor of type and count (the first failure).
  defp expect_tensors(refs, tag, type) do
    Enum.reduce_while(refs, :unverified, fn {x, count}, _ ->
      case expect_tensor(x, tag, type, count, nil) do
        {:fail, _} = f -> {:halt, f}
        r -> {:cont, r}
      end
    end)
  end

  defp g_triangular_solve do
    tag = op_tag()
    type = linalg_type()
    n = weighted([{0, 1}, {range(1, 8), 6}, {range(126, 134), 1}])
    batch = weighted([{0, 1}, {range(1, 3), 6}])
    cols = weighted([{0, 1}, {range(1, 5), 6}, {range(15, 18), 1}])
    a = tensor_of(tag, type, batch * n * n)
    b = tensor_of(tag, type, batch * n * cols)
    flags = for _ <- 1..3, do: chance(0.5)

    mk(
      :triangular_solve,
      [a.ref, b.ref, batch, n, cols | flags],
      [{:tensor, tag}, {:tensor, tag}, :u64, :u64, :u64, :bool, :bool, :bool],
      fn
        {x, singular} ->
          case expect_tensor(x, tag, type, batch * n * cols, nil) do
            {:fail, _} = f -> f
            _ -> expect_tensor(singular, tag, :u32, batch, nil)
          end

        other ->
          {:fail, "triangular_solve returned #{inspect(other, limit: 8)}"}
      end,
      type in [:f32, :f64]
    )
  end

  defp g_matmul do
    tag = op_tag()
    verify = chance(0.5)
    type = if verify, do: pick([:s32, :f32]), else: pick(@cheap_types)
    [batch, m, n, k] = for _ <- 1..4, do: weighted([{0, 1}, {1, 4}, {range(2, 6), 8}])
    {as, a_need} = mm_layout(batch, m, k)
    {bs, b_need} = mm_layout(batch, k, n)
    aoff = rand(3)
    boff = rand(3)
    a = tensor_of(tag, type, aoff + a_need, nice: verify, exact: false)
    b = tensor_of(tag, type, boff + b_need, nice: verify, exact: false)

    mk(
      :matmul,
      [batch, m, n, k, a.ref, aoff, as, b.ref, boff, bs],
      [
        :u64,
        :u64,
        :u64,
        :u64,
        {:tensor, tag},
        :i64,
        {:ilist, 3},
        {:tensor, tag},
        :i64,
        {:ilist, 3}
      ],
      fn ref ->
        expected =
          if verify and a.nice and b.nice do
            av = List.to_tuple(Enum.map(elems(a.data, type), &dec(type, &1)))
            bv = List.to_tuple(Enum.map(elems(b.data, type), &dec(type, &1)))
            zero = if type == :f32, do: 0.0, else: 0

            for bi <- 0..(batch - 1)//1, i <- 0..(m - 1)//1, j <- 0..(n - 1)//1, into: <<>> do
              sum =
                Enum.reduce(0..(k - 1)//1, zero, fn p, acc ->
                  acc +
                    elem(av, aoff + dot([bi, i, p], as)) * elem(bv, boff + dot([bi, p, j], bs))
                end)

              enc(type, sum)
            end
          end

        expect_tensor(ref, tag, type, batch * m * n, expected)
      end
    )
  end

  # Strides [batch, rows, cols] of a row-major or transposed operand (batch
  # stride 0 broadcasts) and the elements it needs.
  defp mm_layout(batch, r, c) do
    [sr, sc] = if chance(0.7), do: [c, 1], else: [1, r]
    sb = if chance(0.2), do: 0, else: r * c
    need = if batch * r * c == 0, do: rand(3), else: max(r * c, 1) + sb * (batch - 1)
    {[sb, sr, sc], need}
  end

  # ------------------------------------------------------------------
  # Mutations
  # ------------------------------------------------------------------
  # mutate/1 replaces one to three arguments. Severity: :must (the call
  # can no longer be valid: it must raise), :may (it may still be valid).
  # A replacement that makes an argument disagree with another one's
  # length counts as :must only when it is the only one replaced.

  defp mutate(call) do
    n = length(call.args)
    k = weighted([{1, 75}, {2, 20}, {3, 5}]) |> min(n)
    positions = Enum.take_random(0..(n - 1), k)

    {args, kinds, sevs, what} =
      Enum.reduce(positions, {call.args, call.kinds, [], []}, fn pos, {args, kinds, sevs, what} ->
        kind = Enum.at(kinds, pos)
        {term, new_kind, sev} = mutation(kind, Enum.at(args, pos))

        {List.replace_at(args, pos, term), List.replace_at(kinds, pos, new_kind), [sev | sevs],
         [pos | what]}
      end)

    # deallocate/1 answers a deallocated tensor with :already_deallocated.
    sevs =
      Enum.map(sevs, fn
        :dead -> if call.fun == :deallocate, do: :may, else: :must
        sev -> sev
      end)

    sev =
      cond do
        :must in sevs -> :must
        :must_len in sevs and k == 1 -> :must
        mixed_devices?(kinds) -> :must
        true -> :may
      end

    {args, sev, Enum.reverse(what)}
  end

  defp mixed_devices?(kinds) do
    tags =
      Enum.flat_map(kinds, fn
        {k, tag} when k in [:device, :tensor, :tensor_dst, :opt_tensor, :opt_dst] -> [tag]
        {:views, tags, _} -> Enum.reject(tags, &is_nil/1)
        _ -> []
      end)

    length(Enum.uniq(tags)) > 1
  end

  @bignums [1 <<< 64, -(1 <<< 63) - 1, 1 <<< 100, -(1 <<< 100), 1 <<< 63]

  # Terms of every kind that no argument accepts.
  defp junk do
    pick([
      :foo,
      1.5,
      -0.0,
      "f32",
      <<1, 2, 3>>,
      <<1::3>>,
      %{},
      %{a: 1},
      self(),
      [],
      [1, 2],
      [1 | 2],
      [:a, :b],
      {1, 2},
      {},
      fn -> :ok end,
      pick(@bignums),
      {:s, 32},
      pick(Process.get(:other_resources)),
      dev(pick([:a, :b]))
    ])
  end

  # A term that is not a tensor resource.
  defp not_a_tensor do
    pick([
      dev(pick([:a, :b, :v])),
      make_ref(),
      pick(Process.get(:other_resources)),
      :tensor,
      nil,
      1,
      "tensor",
      {any_tensor(:a).ref},
      [any_tensor(:a).ref]
    ])
  end

  defp mutation({:device, :victim}, _term) do
    # inject_fault: never another real device.
    {pick([make_ref(), any_tensor(:a).ref, any_dead().ref, :victim, nil]), :junk, :must}
  end

  defp mutation({:device, tag}, _term) do
    case rand(4) do
      0 ->
        {any_tensor(pick([:a, :b])).ref, :junk, :must}

      1 ->
        {any_dead().ref, :junk, :must}

      2 ->
        {not_a_tensor() |> non_device(), :junk, :must}

      _ ->
        other = pick(live_tags() -- [tag])
        {dev(other), {:device, other}, :may}
    end
  end

  # A tensor argument that may also be nil: a mutation to nil is still a
  # valid call.
  defp mutation({:opt_tensor, tag}, term) do
    case mutation({:tensor, tag}, term) do
      {nil, _kind, _sev} -> {nil, :any, :may}
      {t, {:tensor, other}, sev} -> {t, {:opt_tensor, other}, sev}
      other -> other
    end
  end

  # A destination that may also be nil (a new tensor): a mutation to nil
  # is still a valid call.
  defp mutation({:opt_dst, tag}, term) do
    case mutation({:tensor_dst, tag}, term) do
      {nil, _kind, _sev} -> {nil, :any, :may}
      {t, {:tensor_dst, other}, sev} -> {t, {:opt_dst, other}, sev}
      other -> other
    end
  end

  defp mutation({kind, tag}, _term) when kind in [:tensor, :tensor_dst] do
    case rand(6) do
      0 ->
        {any_dead().ref, :junk, :dead}

      1 ->
        {not_a_tensor(), :junk, :must}

      2 ->
        {junk() |> non_tensor(), :junk, :must}

      3 ->
        other = pick(live_tags() -- [tag])

        t =
          if kind == :tensor_dst,
            do: scratch(other, pick(@cheap_types), rand(40)),
            else: any_tensor(other, @cheap_types)

        {t.ref, {kind, other}, :may}

      _ ->
        t =
          if kind == :tensor_dst,
            do: scratch(tag, pick(@cheap_types), rand(40)),
            else: any_tensor(tag, @cheap_types)

        {t.ref, {kind, tag}, :may}
    end
  end

  defp mutation(:i64, _term) do
    if chance(0.6),
      do:
        {pick([
           -1,
           1,
           2,
           7,
           100,
           1 <<< 31,
           (1 <<< 32) - 1,
           1 <<< 32,
           (1 <<< 63) - 1,
           -(1 <<< 63),
           -(1 <<< 31)
         ]), :i64, :may},
      else:
        {pick([1 <<< 63, -(1 <<< 63) - 1, 1 <<< 64, 1 <<< 100, 1.0, :one, "1", nil, [1]]), :junk,
         :must}
  end

  defp mutation(:u64, _term) do
    if chance(0.6),
      do:
        {pick([
           0,
           1,
           2,
           3,
           17,
           1 <<< 31,
           (1 <<< 32) - 1,
           1 <<< 32,
           (1 <<< 63) - 1,
           1 <<< 63,
           (1 <<< 63) + 1,
           (1 <<< 64) - 1
         ]), :u64, :may},
      else: {pick([-1, -(1 <<< 63), 1 <<< 64, 1 <<< 100, 2.0, :two, "2", nil]), :junk, :must}
  end

  defp mutation(:u32, _term) do
    if chance(0.6),
      do: {pick([0, 1, 5, 1000, (1 <<< 32) - 1]), :u32, :may},
      else: {pick([-1, 1 <<< 32, 1 <<< 64, 0.0, :zero, nil]), :junk, :must}
  end

  defp mutation({:index, rank}, _term) do
    if chance(0.6),
      do:
        {pick([rank, rank + 1, 31, (1 <<< 32) - 1]), {:index, rank},
         if(rank == 0, do: :may, else: :must_len)},
      else: {pick([-1, 1 <<< 32, 1 <<< 64, 0.0, :zero, nil]), :junk, :must}
  end

  defp mutation(:device_index, _term) do
    if chance(0.5),
      do: {pick([-1, 0, Process.get(:device_count), 1000, (1 <<< 31) - 1]), :device_index, :may},
      else: {pick([-2, -(1 <<< 31) - 1, 1 <<< 31, 1 <<< 64, 0.0, :default, nil]), :junk, :must}
  end

  defp mutation(:opts, opts) do
    case rand(3) do
      0 ->
        {pick([nil, [], [max_batch_nodes: 4], :opts, "opts", {}]), :junk, :must}

      1 ->
        bad =
          pick(
            max_batch_nodes: -3,
            idle_flush_us: :soon,
            ring_capacity: 1.0,
            staging_bytes: 1 <<< 64,
            pool_limit_bytes: -1,
            disable_disk_cache: 1,
            poison_outputs: nil,
            fast_math: "yes",
            download_kernel: :sometimes,
            cache_dir: 123,
            cache_dir: <<"dir", 0, "x">>,
            cache_dir: String.duplicate("d", 600),
            no_latency_timing: :no,
            no_gpu_timestamps: 0,
            defer_elementwise: "no",
            no_spirv_prune: 1,
            pipeline_threads: -1,
            pipeline_threads: 65,
            pipeline_threads: :on
          )

        {Map.merge(opts, Map.new([bad])), :opts, :must}

      _ ->
        odd =
          pick(
            ring_capacity: 3,
            ring_capacity: 1 <<< 31,
            max_batch_nodes: 1 <<< 40,
            staging_bytes: 16,
            arena_bytes: 64,
            pool_limit_bytes: 1,
            unknown_option: :ignored,
            cache_dir: "/nonexistent/nx_vulkan_fuzz"
          )

        {Map.merge(opts, Map.new([odd])), :opts, :may}
    end
  end

  defp mutation(:shape, term) do
    case rand(5) do
      0 ->
        {pick([
           [1 <<< 62, 8],
           [1 <<< 32, 1 <<< 32, 4],
           [(1 <<< 63) - 1, 2],
           [1 <<< 31, 1 <<< 31],
           [1 <<< 32],
           [-1],
           [3, -2],
           [-(1 <<< 63)],
           List.duplicate(1, @max_rank + 1 + rand(4)),
           [1 | 2],
           [1, :a],
           [1 <<< 64],
           [2.0],
           :shape,
           {2, 2},
           "shape"
         ]), :junk, :must}

      1 ->
        # Empty shapes with huge other dimensions: valid, zero elements.
        {pick([
           [0, 1 <<< 62, 8],
           [1 <<< 62, 0],
           [0, (1 <<< 63) - 1, (1 <<< 63) - 1],
           [0 | List.duplicate((1 <<< 31) - 1, 4)],
           [(1 <<< 32) - 1, 0, 1 <<< 40]
         ]), :shape, :may}

      2 when is_list(term) and term != [] ->
        # The same rank, one dimension 0, the others huge.
        huge = pick([(1 <<< 31) - 1, 1 <<< 40, 1 <<< 62, (1 <<< 63) - 1])
        zero = rand(length(term))
        {for(i <- 0..(length(term) - 1), do: if(i == zero, do: 0, else: huge)), :shape, :may}

      _ ->
        {rand_shape(), :shape, :may}
    end
  end

  defp mutation({:strides, rank}, _term) do
    case rand(5) do
      0 ->
        {nil, {:strides, rank}, :may}

      1 ->
        {for(_ <- 1..rank//1, do: range(-5, 5)), {:strides, rank}, :may}

      2 ->
        {for(
           _ <- 1..rank//1,
           do: pick([1 <<< 40, -(1 <<< 40), (1 <<< 63) - 1, -(1 <<< 63), 1 <<< 31])
         ), {:strides, rank}, :may}

      3 ->
        {pick(other_lengths(rank, 1)), :junk, :must_len}

      _ ->
        {pick([List.duplicate(1, 17), [1 | 1], [:a], [1.0], "strides", 1, {1}, [1 <<< 64]]),
         :junk, :must}
    end
  end

  defp mutation({kind, len}, _term) when kind in [:ilist, :axes, :perm] do
    case rand(4) do
      0 ->
        {pick([List.duplicate(1, 17), [1 | 1], [:a], [1.0], "list", 1, nil, [1 <<< 64]]), :junk,
         :must}

      1 ->
        {pick(other_lengths(len, 0)), :junk, if(kind == :axes, do: :may, else: :must_len)}

      2 ->
        case kind do
          :axes when len > 0 ->
            {[pick([len, len + 3, -1, 1 <<< 40])], :junk, :must_len}

          :axes ->
            {[0], :junk, :must_len}

          :perm when len > 1 ->
            {List.duplicate(0, len), :junk, :must_len}

          :perm ->
            {[len + 1], :junk, :must_len}

          _ ->
            {for(
               _ <- 1..len//1,
               do: pick([1 <<< 40, -(1 <<< 40), (1 <<< 63) - 1, -(1 <<< 63), 0, -1])
             ), {kind, len}, :may}
        end

      _ ->
        {for(_ <- 1..len//1, do: range(-3, 5)), {kind, len}, :may}
    end
  end

  defp mutation(:dtype, _term) do
    if chance(0.5),
      do: {pick(@cheap_types), :dtype, :may},
      else:
        {pick([:f33, :int, :float, :c32, :bool, nil, true, "f32", 32, {:f, 32}, :u4, :s128]),
         :junk, :must}
  end

  defp mutation({:op, family}, _term) do
    all = @binary_ops ++ @unary_ops ++ @compare_ops ++ @reduce_ops

    if chance(0.5),
      do: {pick(cheap(family)), {:op, family}, :may},
      else:
        {pick([
           :foo,
           :add!,
           "add",
           1,
           nil | Enum.take_random(Enum.reject(all, &(&1 in family)), 3)
         ]), :junk, :must}
  end

  defp mutation({:choice, choices}, _term) do
    if chance(0.3),
      do: {pick(choices), {:choice, choices}, :may},
      else: {pick([:foo, nil, "max", 0, true, :argmaxx]), :junk, :must}
  end

  defp mutation(:bool, _term) do
    if chance(0.3),
      do: {pick([true, false]), :bool, :may},
      else: {pick([nil, 1, 0, :yes, "true", []]), :junk, :must}
  end

  defp mutation({:binary, type}, _term) do
    s = es(type)

    case rand(3) do
      0 when s > 1 -> {:rand.bytes(s * rand(5) + range(1, s - 1)), :junk, :must_len}
      1 -> {pick([<<1::3>>, [<<1, 2>>], :bin, 12, nil, ~c"ab"]), :junk, :must}
      _ -> {:rand.bytes(s * rand(5)), {:binary, type}, :may}
    end
  end

  defp mutation(:float, _term) do
    if chance(0.5),
      do: {pick([0.0, -1.0, 1.0e300, -0.0, 5.0e-324]), :float, :may},
      else: {pick([0, 1, :eps, nil, "1e-3"]), :junk, :must}
  end

  defp mutation(:program, _term) do
    bad_word = 1 ||| 2 <<< 2 ||| 0 <<< 9 ||| 1 <<< 16

    case rand(4) do
      0 ->
        {pick(programs()) |> elem(0), :program, :may}

      1 ->
        {pick([
           [],
           List.duplicate(bad_word, 113),
           [-1],
           [1 <<< 32],
           [bad_word ||| 1 <<< 30],
           [0 ||| 1 <<< 2 ||| 1 <<< 23]
         ]), :junk, :must}

      2 ->
        {[1 ||| 0 <<< 2 ||| 0 <<< 9 ||| 29 <<< 16], :junk, :must_len}

      _ ->
        {pick([:prog, nil, [1 | 2], [:add], "prog", [1.0]]), :junk, :must}
    end
  end

  defp mutation({:views, tags, rank}, views) do
    # The inputs that are views (fused/4 also takes immediates).
    tuples = for {v, i} <- Enum.with_index(views), is_tuple(v), do: i

    case rand(5) do
      0 ->
        {pick([[], :views, nil, [1 | 2]]), :junk, :must}

      1 ->
        {List.duplicate(hd(views), 13), :junk, :must}

      2 ->
        i = pick(tuples)
        {t, o, s} = Enum.at(views, i)

        bad =
          pick([
            {t, o},
            t,
            {any_dead().ref, o, s},
            {not_a_tensor(), o, s},
            {t, :o, s},
            {t, o, [1 | 1]},
            <<1, 2, 3>>
          ])

        {List.replace_at(views, i, bad), :junk, :must}

      3 ->
        i = pick(tuples)
        {_, o, s} = Enum.at(views, i)
        other = pick([:a, :b])

        {List.replace_at(views, i, {any_tensor(other).ref, o, s}),
         {:views, List.replace_at(tags, i, other), rank}, :may}

      _ ->
        i = pick(tuples)
        {t, o, _} = Enum.at(views, i)
        {List.replace_at(views, i, {t, o, List.duplicate(1, rank + 1)}), :junk, :must_len}
    end
  end

  # supported/4 answers false for any op term.
  # A plan made invalid: every one of these must raise.
  defp mutation(:plan, {n, ops, outputs} = plan) do
    k = rand(tuple_size(ops))
    {name, index, args, out, free} = elem(ops, k)
    put = fn op -> {n, put_elem(ops, k, op), outputs} end

    term =
      case rand(8) do
        0 ->
          junk()

        # index 0 (device_count, which a plan may not call) or none
        1 ->
          put.({name, pick([0, 100_000]), args, out, free})

        2 ->
          {n, ops, Tuple.append(outputs, n)}

        # the last slot is written by this op or a later one
        3 ->
          put.({name, index, put_elem(args, 0, {:s, n - 1}), out, free})

        4 ->
          put.({name, index, Tuple.delete_at(args, tuple_size(args) - 1), out, free})

        5 ->
          put.({name, index, args, {}, free})

        # a name that is not the index's NIF
        6 ->
          put.({pick([:download, :nope, :copy]), index, args, out, free})

        _ ->
          put.({name, index, put_elem(args, 0, pick([{:q, 0}, :p, {:p}, {:l, [1]}])), out, free})
      end

    {if(term == plan, do: :plan, else: term), :junk, :must}
  end

  # Parameters made invalid: a plan reads every one of them.
  defp mutation(:params, params) do
    term =
      case rand(3) do
        0 -> Tuple.to_list(params)
        1 -> put_elem(params, rand(tuple_size(params)), any_dead().ref)
        _ -> pick([{}, :params, [], {1, 2}])
      end

    {term, :junk, :must}
  end

  defp mutation(:any, _term), do: {junk(), :any, :may}
  defp mutation(_kind, _term), do: {junk(), :junk, :must}

  defp live_tags, do: if(Process.get(:victim_faulted), do: [:a, :b], else: [:a, :b, :v])

  # Ops of a family that compile quickly (the others are drawn rarely).
  defp cheap(@unary_ops), do: @cheap_unary
  defp cheap(@binary_ops), do: @cheap_binary
  defp cheap(@compare_ops), do: @cheap_compare
  defp cheap(family), do: family

  # Lists of x one element longer or shorter than len.
  defp other_lengths(0, x), do: [[x]]
  defp other_lengths(len, x), do: [List.duplicate(x, len + 1), List.duplicate(x, len - 1)]

  defp non_device(term) do
    devs = Map.values(Process.get(:devs))
    if term in devs, do: make_ref(), else: term
  end

  defp non_tensor(term) do
    if is_reference(term) and match?({:ok, _}, attempt(:tensor_info, [term])),
      do: make_ref(),
      else: term
  end

  # ------------------------------------------------------------------
  # Fixed cases: shrunk reproducers of what the fuzzer found, run first.
  # ------------------------------------------------------------------

  defp preamble do
    a = dev(:a)
    b = dev(:b)
    empty = setup_call(:upload, [a, :f32, <<>>])
    one = setup_call(:upload, [a, :f32, <<1.0::float-32-native>>])
    s32 = setup_call(:upload, [a, :s32, nice_data(:s32, 8)])
    foreign = setup_call(:upload, [b, :s32, nice_data(:s32, 8)])
    huge = (1 <<< 31) - 1

    fixed = [
      # Tensors of two devices in one op are refused.
      {:must_fail, :binary, [:add, [8], s32, 0, nil, foreign, 0, nil]},
      {:must_fail, :copy_into, [setup_call(:empty, [a, :s32, 8]), 0, [1], [8], foreign, 0, nil]},
      {:must_fail, :matmul, [1, 2, 2, 2, s32, 0, [4, 2, 1], foreign, 0, [4, 2, 1]]},
      # Element counts that overflow 64 bits.
      {:must_fail, :unary, [:copy, [1 <<< 62, 8], s32, 0, nil]},
      {:must_fail, :unary, [:copy, [1 <<< 32, 1 <<< 32, 4], s32, 0, [0, 0, 0]]},
      {:must_fail, :fill, [a, :u8, 1 <<< 40, <<0>>]},
      # Empty shapes whose other dimensions overflow the dense strides.
      {:ok, :unary, [:copy, [0, 1 <<< 62, 8], empty, 0, nil]},
      {:ok, :transpose, [[0, 1 <<< 62, 8], empty, [2, 1, 0]]},
      {:ok, :window_reduce,
       [
         :sum,
         empty,
         [0, huge, huge, huge],
         [1, 1, 1, 1],
         [1, 1, 1, 1],
         [1, huge, huge, huge],
         [1, 1, 1, 1],
         [1, 0, 0, 0]
       ]},
      {:ok, :window_scatter,
       [
         :max,
         empty,
         empty,
         one,
         [0, huge, huge, huge],
         [1, 1, 1, 1],
         [1, huge, huge, huge],
         [0, 0, 0, 0],
         [0, 0, 0, 0]
       ]},
      {:any, :conv,
       [
         empty,
         one,
         [1, 1, 0, huge, huge, huge],
         [1, 1, 1, 1, 1, 1],
         [1, 1, 1, 1, 1, 1],
         [1, huge, huge, huge],
         [1, 0, 0, 0],
         [0, 0, 0, 0],
         [1, 1, 1, 1],
         [1, 1, 1, 1],
         1,
         1
       ]},
      # Reductions over empty axes next to huge ones (collapsing the
      # reduced axes multiplied 2^40 by 2^40).
      {:ok, :reduce, [:sum, [3, 1 <<< 40, 1 <<< 40, 0], empty, 0, nil, [1, 2, 3], :f32]},
      {:ok, :argreduce, [:argmax, false, [3, 1 <<< 40, 1 <<< 40, 0], empty, 0, nil, [3, 1, 2]]},
      # A sort of an empty tensor with rows 0 and a huge row length.
      {:any, :sort, [empty, 0, (1 <<< 64) - 1, false, :values]},
      {:any, :sort, [empty, 0, 1 <<< 63, true, :both]}
    ]

    for {want, fun, args} <- fixed do
      what = {fun, args, []}
      ping("the fixed case #{describe(what)}", true)
      if Process.get(:verbose), do: IO.puts(describe(what))
      outcome = attempt(fun, args)

      ok? =
        case {want, outcome} do
          {:must_fail, {kind, _}} when kind in [:argument_error, :device_error] -> true
          {:ok, {:ok, r}} -> sanity(fun, r) == :ok
          {:any, {:ok, r}} -> sanity(fun, r) == :ok
          {:any, {kind, _}} when kind in [:argument_error, :device_error] -> true
          _ -> false
        end

      if ok?,
        do: Process.put(:fixed, %{passed: Process.get(:fixed).passed + 1}),
        else:
          fail(
            "fixed case, expected #{want}, got #{inspect(outcome, limit: 8)}: #{describe(what)}"
          )
    end
  end
end

NxVulkan.NifFuzz.main(System.argv())
