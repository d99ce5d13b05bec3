defmodule Nx.Vulkan.Fusion do
  @moduledoc false
  # Elementwise fusion of the ops of a Nx.Vulkan.Compiler plan.
  #
  # A plan op is {name, arg_specs, result_slots} (see the compiler). Ops
  # of the same output shape and type (a float type, or s32, s64, u32 or
  # u64), each read densely by the next, become one `Nx.Vulkan.NIF.fused/4`
  # call (a program of at most 64 ops over at most 12 inputs; two such
  # programs may run as one of two results, up to 112 instructions,
  # pair_programs/3): unary and
  # binary ops (of integers, those that keep the type), comparisons read
  # as a select's predicate, and selects. A transpose whose only use
  # is a dense read by a fused op is folded into that read (strides). A
  # group whose result several ops read is recomputed in each fused op
  # that reads it when it is a single op or a group of cheap ones (no
  # division, power or transcendental function), within a program's
  # limits; inside one program its ops run once, so chains whose results
  # are read twice, such as threefry's rounds, fuse several steps deep. It
  # is computed on its own only where some read of it was not recomputed.
  # A comparison no select takes in stays an op of its own (its u8 result
  # is no program's), its operands' groups programs of their own.
  # A group of cheap ops with a one-element result that a program reads as
  # a broadcast is computed inside that program at every element, from
  # broadcast reads of its own inputs (reads?/4).
  # A number that a binary op or comparison takes as its second operand
  # (the first, for an op whose operands commute) is a literal of the
  # program when it fits 16 bits (literal_bits/2: an integer of int16 or
  # uint16, a float that an f16 holds exactly): such constants of the
  # computation (threefry's rotation amounts, small factors) cost no input.
  # A program whose one use is a copy of its result into a block of a
  # fresh tensor (a concatenation's) writes that block itself
  # (into_destinations/2), and a program reading such a tensor whole, where
  # programs write all its blocks, runs inside those programs
  # (fold_readers/4).
  # The fused kernel computes bitwise what the ops compute one kernel each
  # (nxv_fused in nxv.h), so a replay returns what the evaluation did.
  #
  # Programs are chosen by what the device supports
  # (`Nx.Vulkan.NIF.fused_check/5`: the type, each op for the type; no
  # pipeline created), each group only once an op left in the plan reads
  # it (keep/3), so a group every reader recomputes is never checked. A
  # program the device does not support keeps its ops unfused. Only the
  # programs of the finished plan then run once on scratch inputs of the
  # real sizes and layouts (plan/5), which creates their pipelines: one
  # that fails there (past the per-device program limit, a pipeline the
  # driver could not create, inputs the runtime refuses) is planned again
  # without it. So no pipeline is made for a program that a pair replaces.

  import Bitwise

  @float_types [:f16, :bf16, :f32, :f64]
  @int_types [:s32, :s64, :u32, :u64]
  @max_inputs 12
  # A program runs at most 112 instructions (NXV_FUSED_MAX_INSTRS), but
  # groups grow to 64: chains read several times, such as threefry's
  # rounds, each recompute their shared history, and larger groups
  # recompute more of it without cutting such a chain into fewer
  # programs. Pairs (pair_programs/3) merge groups up to the kernel's
  # limit.
  @max_group_instrs 64
  @max_instrs 112
  @pair_window 64

  # Op numbers of nxv.h (nxv_binary_op, nxv_unary_op, nxv_compare_op); the
  # float ops of each family that fused programs run.
  @binary ~w(add subtract multiply divide max min pow remainder quotient atan2)a
          |> Enum.with_index()
          |> Map.new()
          |> Map.delete(:quotient)
  @unary ~w(copy negate abs sign sqrt rsqrt exp log sin cos tanh sigmoid floor ceil
            round bitwise_not square expm1 log1p erf erfc erf_inv tan sinh cosh cbrt
            asin acos atan asinh acosh atanh)a
         |> Enum.with_index()
         |> Map.new()
         |> Map.delete(:bitwise_not)
  @compare ~w(equal not_equal less less_equal greater greater_equal logical_and
              logical_or logical_xor)a
           |> Enum.with_index()
           |> Map.new()

  # The integer ops of each family that fused programs of s32, s64, u32
  # and u64 run: every binary op of those types, the unary ops that keep
  # the type.
  @int_binary ~w(add subtract multiply divide max min pow remainder quotient atan2
                 bitwise_and bitwise_or bitwise_xor left_shift right_shift)a
              |> Enum.with_index()
              |> Map.new()
              |> Map.drop([:divide, :pow, :atan2])
  @int_unary %{copy: 0, negate: 1, abs: 2, sign: 3, bitwise_not: 15, square: 16}

  @doc """
  The fused form of the plan `ops` (in order, as the compiler plans them):
  `fuse/5`, `into_destinations/2`, `fold_readers/4` and `pair_programs/3`
  in turn, then each
  program of the result run once on scratch inputs of the real sizes and
  layouts, which creates its pipeline. The programs that fail there are
  planned again without them (`rejected` holds such programs' keys), so
  every program of the returned plan ran on the device. Arguments as
  `fuse/5`'s.
  """
  def plan(ops, out_specs, info, device, rejected \\ MapSet.new()) do
    planned =
      ops
      |> fuse(out_specs, info, device, rejected)
      |> into_destinations(out_specs)
      |> fold_readers(out_specs, device, rejected)
      |> pair_programs(device, rejected)

    failed =
      for op <- planned,
          key = program_key(op),
          key != nil and not scratch_runs?(op, info, device),
          into: MapSet.new(),
          do: key

    if MapSet.size(failed) == 0,
      do: planned,
      else: plan(ops, out_specs, info, device, MapSet.union(rejected, failed))
  end

  # The key under which plan/5 rejects a program op: a program of one
  # result by its type, shape, words and inputs (whether it writes a new
  # tensor or a block), a pair as the op itself; nil for other ops.
  defp program_key({:fused, [{:c, type}, {:c, shape}, {:c, words}, {:l, inputs}], _out}),
    do: {:single, type, shape, words, inputs}

  defp program_key({:fused_into, [_dst, _off, {:c, t}, {:c, shape}, {:c, words}, {:l, ins}], _}),
    do: {:single, t, shape, words, ins}

  defp program_key({:fused_pair, _specs, _out} = op), do: {:pair, op}
  defp program_key(_op), do: nil

  # Runs a program op of plan/5 once on scratch inputs (on_scratch/5):
  # false when it fails there. A block's program runs as a program of a
  # new tensor (the same pipeline).
  defp scratch_runs?(op, info, device) do
    case program_key(op) do
      {:single, type, shape, words, inputs} -> runs?(type, shape, words, inputs, info, device)
      {:pair, _} -> pair_runs?(op, info, device)
    end
  end

  @doc """
  Fuses the elementwise ops of `ops` (in order, as the compiler plans
  them). `out_specs` are the plan's output specs (their slots count as
  uses), `info` maps a spec to its tensor's `{type, count}` (nil when
  unknown), `device` is the plan's device index (nil: the default).
  Programs are checked against what the device supports, not run (see
  `plan/5`); a program whose key `rejected` holds (`plan/5`) is not made.
  """
  def fuse(ops, out_specs, info, device, rejected \\ MapSet.new()) do
    ops = List.to_tuple(ops)
    n = tuple_size(ops)
    uses = count_uses(ops, out_specs)

    producer = for i <- 0..(n - 1)//1, slot <- elem(elem(ops, i), 2), into: %{}, do: {slot, i}

    members =
      for i <- 0..(n - 1)//1,
          m = member(elem(ops, i), info),
          into: %{},
          do: {i, m}

    transposes =
      for i <- 0..(n - 1)//1,
          t = transpose_view(elem(ops, i), uses, info),
          into: %{},
          do: t

    # Groups by root, built in op order: an op takes the groups of the
    # operands it may absorb (absorb/5). A group is its members' indices,
    # in op order.
    # taken: for each comparison, the groups of its operands' producers
    # before it took them in (split_comparisons/2).
    {groups, taken} =
      Enum.reduce(Enum.sort(Map.keys(members)), {%{}, %{}}, fn i, {groups, taken} ->
        m = members[i]
        ctx = {uses, producer, members, transposes}

        taken =
          if m.kind == :compare,
            do: Map.put(taken, i, Map.take(groups, operand_producers(m, producer))),
            else: taken

        {group, groups} =
          m.operands
          |> Enum.with_index()
          |> Enum.reduce({[i], groups}, fn {operand, pos}, acc ->
            absorb(operand, pos, m, acc, ctx)
          end)

        {Map.put(groups, i, group), taken}
      end)

    groups = split_comparisons(groups, taken)

    programs =
      for {root, group} <- groups,
          members[root].kind != :compare,
          length(group) > 1 or absorbs_transpose?(group, members, producer, transposes),
          into: %{},
          do: {root, program(root, group, members, producer, transposes)}

    pure = MapSet.new(Map.keys(members) ++ Enum.map(Map.keys(transposes), &producer[&1]))
    needed = out_specs |> Enum.flat_map(&slots_in/1) |> MapSet.new()

    tried =
      for {root, {op, _check}} <- programs,
          MapSet.member?(rejected, program_key(op)),
          into: %{},
          do: {root, false}

    keep(programs, tried, {ops, n, pure, needed, device})
  end

  @doc """
  Writes each fused program of `ops` (as `fuse/5` returns them) whose one
  use is a `copy_into` of its whole result, densely, into a block of a
  tensor made by `empty` (a concatenation's or a stack's block) straight
  into that block: the program becomes a `fused_into` op
  (`Nx.Vulkan.NIF.fused_into/6`) and the copy goes. Only where nothing
  between the program and the copy uses the destination but writes of
  elements outside the block, the program reads no part of it, and the
  destination is made by an `empty` of the program's type (moved before
  the program when it came after), so every op still reads what it read
  and each element's last write stays the last. `out_specs` are the
  plan's output specs.
  """
  def into_destinations(ops, out_specs) do
    ops = List.to_tuple(ops)
    n = tuple_size(ops)
    uses = count_uses(ops, out_specs)
    producer = for i <- 0..(n - 1)//1, slot <- elem(elem(ops, i), 2), into: %{}, do: {slot, i}
    writes = for c <- 0..(n - 1)//1, w = block_write(ops, c, uses, producer), do: {c, w}

    # An empty that Nx made after a block's program (a concatenation's
    # operands come first) moves to just before the first such program.
    hoist =
      writes
      |> Enum.filter(fn {_c, {f, e, _op}} -> e > f end)
      |> Enum.group_by(fn {_c, {_f, e, _op}} -> e end, fn {_c, {f, _e, _op}} -> f end)
      |> Map.new(fn {e, fs} -> {e, Enum.min(fs)} end)

    edits =
      Enum.reduce(writes, %{}, fn {c, {f, _e, op}}, acc ->
        acc |> Map.put(c, []) |> Map.put(f, [op])
      end)

    edits =
      Enum.reduce(hoist, edits, fn {e, f}, acc ->
        acc |> Map.put(e, []) |> Map.put(f, [elem(ops, e) | acc[f]])
      end)

    ops
    |> Tuple.to_list()
    |> Enum.with_index()
    |> Enum.flat_map(fn {op, i} -> Map.get(edits, i, [op]) end)
  end

  @doc """
  Folds each fused program of `ops` (as `into_destinations/2` returns
  them) that reads a tensor whose every block a program writes in place
  (`fused_into` ops: the operands of a concatenation or a stack) into
  those programs: each computes the reader's program over its block and
  writes that into the same block of the reader's result, which the
  tensor's `empty` then makes; the tensor and the reader go. Only where
  the reader is one program of the tensor's type that reads it once,
  densely and whole, its other inputs immediates or broadcasts of one
  element made before the first block's program and not written since;
  where the blocks cover the tensor without overlapping and nothing else
  uses it (no output); and where each merged program fits a program's
  limits, the device supports it (`Nx.Vulkan.NIF.fused_check/5`) and
  `rejected` (`plan/5`) does not hold it. `Nx.Random` so turns its
  concatenated bits into numbers inside the programs that compute them.
  `out_specs` are the plan's output specs, `device` is `fuse/5`'s.
  """
  def fold_readers(ops, out_specs, device, rejected \\ MapSet.new()) do
    tuple = List.to_tuple(ops)
    n = tuple_size(tuple)
    uses = count_uses(tuple, out_specs)
    producer = for i <- 0..(n - 1)//1, slot <- elem(elem(tuple, i), 2), into: %{}, do: {slot, i}
    ctx = {tuple, uses, producer, device, rejected}

    # One fold at a time: a folded reader's result may itself be read by
    # a program that folds in turn (a chain over a concatenation).
    case Enum.find_value(0..(n - 1)//1, &fold_reader(&1, ctx)) do
      nil -> ops
      edits -> ops |> apply_edits(edits) |> fold_readers(out_specs, device, rejected)
    end
  end

  # The edits (index => ops in its place) that fold the program at index
  # r into the programs that write the blocks of the tensor it reads
  # (fold_readers/4), else nil.
  defp fold_reader(r, {ops, uses, producer, device, rejected}) do
    with {:fused, [{:c, type}, {:c, shape}, {:c, words}, {:l, inputs}], [out]} <- elem(ops, r),
         true <- is_list(words) and is_list(shape),
         {fixed, [{:t, [{:s, d}, {:c, 0}, {:c, nil}]} = whole]} <-
           Enum.split_with(inputs, &position_free?/1),
         e when is_integer(e) <- producer[d],
         {:empty, [_, {:c, ^type}, {:c, count}] = empty_specs, [^d]} <- elem(ops, e),
         true <- count == Enum.product(shape) and count > 0,
         users = for(k <- (e + 1)..(r - 1)//1, d in op_slots(elem(ops, k)), do: k),
         [first | _] <- users,
         writers = Enum.map(users, &program_of(elem(ops, &1))),
         true <- Enum.all?(writers, &match?(%{dst: ^d, type: ^type}, &1)),
         true <- uses[d] == length(users) + 1 and covers?(writers, count),
         reads = Enum.flat_map(fixed, &slots_in/1),
         true <- Enum.all?(reads, &(Map.get(producer, &1, -1) < first)),
         true <-
           Enum.all?((first + 1)..(r - 1)//1, &leaves_alone?(elem(ops, &1), reads, nil, nil)),
         reader = %{inputs: inputs, words: words},
         folded = Enum.map(writers, &fold_into(&1, reader, whole, out)),
         true <- Enum.all?(folded, &(&1 != nil and folded_ok?(&1, device, rejected))) do
      Enum.zip(users, folded)
      |> Map.new(fn {k, op} -> {k, [op]} end)
      |> Map.put(e, [{:empty, empty_specs, [out]}])
      |> Map.put(r, [])
    else
      _ -> nil
    end
  end

  # Whether a program input reads the same at every element: an immediate
  # or a broadcast of one element.
  defp position_free?({:c, bytes}), do: is_binary(bytes)

  defp position_free?({:t, [_spec, {:c, off}, {:c, strides}]}),
    do: is_integer(off) and is_list(strides) and Enum.all?(strides, &(&1 == 0))

  defp position_free?(_spec), do: false

  # The slots an op reads, writes or makes.
  defp op_slots({_name, specs, out}), do: Enum.flat_map(specs, &slots_in/1) ++ out

  # Whether the blocks of programs (of one destination) cover its count
  # elements without overlapping.
  defp covers?(programs, count) do
    ranges =
      programs
      |> Enum.map(fn p -> {p.off, p.off + Enum.product(p.shape)} end)
      |> Enum.sort()

    Enum.sum(Enum.map(ranges, fn {lo, hi} -> hi - lo end)) == count and
      Enum.all?(ranges, fn {lo, hi} -> lo >= 0 and hi <= count end) and
      ranges |> Enum.chunk_every(2, 1, :discard) |> Enum.all?(fn [a, b] -> apart?(a, b) end)
  end

  # The fused_into op writing into slot out, at program w's offset, the
  # reader's program over w's result (the reader's dense read `whole` of
  # w's destination is w's result register; its other inputs, each one
  # element, read as broadcasts over w's shape), else nil when the merged
  # program passes a program's limits or ends on another register.
  defp fold_into(w, reader, whole, out) do
    zeros = Enum.map(w.shape, fn _ -> 0 end)

    reader_inputs =
      Enum.map(reader.inputs, fn
        ^whole -> whole
        {:t, [spec, off, {:c, _}]} -> {:t, [spec, off, {:c, zeros}]}
        imm -> imm
      end)

    inputs = Enum.uniq(w.inputs ++ (reader_inputs -- [whole]))
    nin = length(inputs)
    index = inputs |> Enum.with_index() |> Map.new()
    {acc, rw} = translate(w, index, {%{}, []}, nin)
    reader = %{inputs: reader_inputs, words: reader.words}
    {{_, words}, rr} = translate(reader, Map.put(index, whole, rw), acc, nin)
    words = Enum.reverse(words)

    if nin <= @max_inputs and length(words) <= @max_instrs and rr == nin + length(words) - 1,
      do:
        {:fused_into,
         [{:s, out}, {:c, w.off}, {:c, w.type}, {:c, w.shape}, {:c, words}, {:l, inputs}], []}
  end

  # Whether a folded program may run: not rejected, and supported.
  defp folded_ok?({:fused_into, [_, _, {:c, t}, {:c, shape}, {:c, words}, {:l, ins}], _}, d, rej),
    do:
      not MapSet.member?(rej, {:single, t, shape, words, ins}) and
        checks?(t, length(ins), words, 0, d)

  # ops (a list) with each index of edits replaced by its ops.
  defp apply_edits(ops, edits) do
    ops
    |> Enum.with_index()
    |> Enum.flat_map(fn {op, i} -> Map.get(edits, i, [op]) end)
  end

  @doc """
  Pairs fused programs of `ops` (as `into_destinations/2` returns them)
  into programs of two results (`Nx.Vulkan.NIF.fused_pair/9`): two
  programs of one type and shape whose instructions, shared ones counted
  once (the same op on the same inputs is one instruction of the merged
  program), fit one program run as one dispatch, where each wrote a new
  tensor or a block of a destination, and the pair writes both. Such
  pairs are the words of a counter-based generator (threefry's two words
  after the same rounds), which single-result programs each compute in
  full. The later program is found among the 64 ops after the earlier
  one. The pair takes the earlier program's place where the later one can
  run there (every slot it reads is made before that place, or is the
  earlier program's result, read densely: a register of the pair; nothing
  between writes a slot it reads or meets its block), else the later
  one's place where the earlier one can run there (nothing between reads
  its result, uses its destination, or writes a slot it reads); and only
  where no input of the pair reads either destination. `device` is `fuse/5`'s: a pair the
  device does not support (`Nx.Vulkan.NIF.fused_check/5`), or whose op
  `rejected` holds (`plan/5`), stays two programs.
  """
  def pair_programs(ops, device, rejected \\ MapSet.new()) do
    ops = List.to_tuple(ops)
    n = tuple_size(ops)
    producer = for i <- 0..(n - 1)//1, slot <- elem(elem(ops, i), 2), into: %{}, do: {slot, i}

    {ops, gone, _producer} =
      Enum.reduce(0..(n - 1)//1, {ops, MapSet.new(), producer}, fn i, {ops, gone, producer} ->
        with false <- MapSet.member?(gone, i),
             %{} = a <- program_of(elem(ops, i)),
             {j, op, place} <- partner(ops, i, a, gone, producer, device, rejected) do
          # The pair at place; the other index goes.
          other = if place == i, do: j, else: i
          producer = Enum.reduce(elem(op, 2), producer, &Map.put(&2, &1, place))
          {put_elem(ops, place, op), MapSet.put(gone, other), producer}
        else
          _ -> {ops, gone, producer}
        end
      end)

    for {op, i} <- Enum.with_index(Tuple.to_list(ops)), i not in gone, do: op
  end

  # The parts of a fused op of one result: %{type, shape, words, inputs
  # (input specs), dst (slot or nil), off, out (result slots)}, else nil.
  defp program_of({:fused, [{:c, type}, {:c, shape}, {:c, words}, {:l, inputs}], out})
       when is_list(words) and is_list(shape),
       do: %{type: type, shape: shape, words: words, inputs: inputs, dst: nil, off: 0, out: out}

  defp program_of(
         {:fused_into, [{:s, dst}, {:c, off}, {:c, type}, {:c, shape}, {:c, words}, {:l, inputs}],
          []}
       )
       when is_list(words) and is_list(shape) and is_integer(off),
       do: %{type: type, shape: shape, words: words, inputs: inputs, dst: dst, off: off, out: []}

  defp program_of(_op), do: nil

  # The first program among the @pair_window ops after op i (program a)
  # that pairs with it: {its index, the pair op, the pair's index}, else
  # nil. (The window
  # bounds a plan's pairing time: each candidate's check walks the ops
  # between.)
  defp partner(ops, i, a, gone, producer, device, rejected) do
    last = min(i + @pair_window, tuple_size(ops) - 1)

    Enum.find_value((i + 1)..last//1, fn j ->
      with false <- MapSet.member?(gone, j),
           %{type: type, shape: shape} = b <- program_of(elem(ops, j)),
           true <- type == a.type and shape == a.shape,
           place when place != nil <- place(ops, i, j, a, b, gone, producer),
           {inputs, words, ra, rb} <- merge_programs(a, b),
           slots = Enum.flat_map(inputs, &slots_in/1),
           true <- a.dst not in slots and b.dst not in slots,
           true <- blocks_apart?(a, b),
           {first, second, reg} = if(rb > ra, do: {b, a, ra}, else: {a, b, rb}),
           op =
             {:fused_pair,
              [{:c, type}, {:c, shape}, {:c, words}, {:c, reg}, {:l, inputs}] ++
                dest_specs(first) ++ dest_specs(second), first.out ++ second.out},
           false <- MapSet.member?(rejected, {:pair, op}),
           true <- checks?(type, length(inputs), words, reg, device) do
        {j, op, place}
      else
        _ -> nil
      end
    end)
  end

  defp dest_specs(%{dst: nil}), do: [{:c, nil}, {:c, 0}]
  defp dest_specs(%{dst: dst, off: off}), do: [{:s, dst}, {:c, off}]

  # Two blocks of one destination do not overlap.
  defp blocks_apart?(%{dst: d, off: o1, shape: shape}, %{dst: d, off: o2}) when d != nil do
    count = Enum.product(shape)
    count == 0 or apart?({o1, o1 + count}, {o2, o2 + count})
  end

  defp blocks_apart?(_a, _b), do: true

  # Where the pair of programs a (op i) and b (op j) computes what both
  # compute: at i where b can move there (movable?/7), else at j where a
  # can (movable_late?/5), else nil.
  defp place(ops, i, j, a, b, gone, producer) do
    cond do
      movable?(ops, i, j, b, a.out, gone, producer) -> i
      movable_late?(ops, i, j, a, gone) -> j
      true -> nil
    end
  end

  # Whether program a (op i) computes the same at op j's place: no op left
  # between them reads its results or uses its destination, or writes or
  # frees a slot it reads.
  defp movable_late?(ops, i, j, a, gone) do
    reads = Enum.flat_map(a.inputs, &slots_in/1)
    own = if a.dst == nil, do: a.out, else: [a.dst | a.out]

    Enum.all?((i + 1)..(j - 1)//1, fn k ->
      op = elem(ops, k)

      MapSet.member?(gone, k) or
        (leaves_alone?(op, reads, nil, nil) and not Enum.any?(op_slots(op), &(&1 in own)))
    end)
  end

  # Whether program b (op j) computes the same at op i's place: each slot
  # it reads, and its destination, is made before op i (or is op i's
  # result, own, which the pair computes before b's instructions), and no
  # op left between them writes, frees or reads such a slot, but for
  # writes of other blocks of b's destination (which the block then meets
  # no more than it did).
  defp movable?(ops, i, j, b, own, gone, producer) do
    reads = Enum.flat_map(b.inputs, &slots_in/1)
    count = Enum.product(b.shape)
    range = {b.off, b.off + count}
    made_before = fn slot -> slot in own or Map.get(producer, slot, -1) < i end

    Enum.all?(reads, made_before) and (b.dst == nil or made_before.(b.dst)) and
      Enum.all?((i + 1)..(j - 1)//1, fn k ->
        MapSet.member?(gone, k) or leaves_alone?(elem(ops, k), reads, b.dst, range)
      end)
  end

  # Whether op neither writes nor frees a slot of reads, and touches slot
  # dst (nil: none) only by writing elements outside range.
  defp leaves_alone?({name, specs, _out} = op, reads, dst, range) do
    written =
      case {name, specs} do
        {name, [{:s, slot} | _]} when name in [:copy_into, :fused_into, :deallocate] -> [slot]
        {:deallocate_many, specs} -> Enum.flat_map(specs, &slots_in/1)
        {:fused_pair, specs} -> specs |> Enum.drop(5) |> Enum.flat_map(&slots_in/1)
        _ -> []
      end

    not Enum.any?(written, &(&1 in reads)) and (dst == nil or dst_untouched?(op, dst, range))
  end

  defp dst_untouched?({:fused_into, [{:s, dst}, {:c, off}, _, {:c, shape} | rest], []}, dst, r)
       when is_integer(off) and is_list(shape),
       do:
         apart?({off, off + Enum.product(shape)}, r) and
           dst not in Enum.flat_map(rest, &slots_in/1)

  defp dst_untouched?({:copy_into, _, _} = op, dst, range), do: other_block?(op, dst, range)

  defp dst_untouched?({_name, specs, out}, dst, _range),
    do: dst not in out and dst not in Enum.flat_map(specs, &slots_in/1)

  # The program of two results that runs programs a and b: {inputs,
  # words, a's result register, b's}, each instruction of both once (the
  # same word over the same registers computes the same), b's dense read
  # of a's result (a chain) its register; nil past a program's limits,
  # when b reads a's result otherwise (a view of it), when both results
  # are one register or when neither is the last one (the program's
  # result; the other is the second).
  defp merge_programs(a, b) do
    internal = for slot <- a.out, do: {:t, [{:s, slot}, {:c, 0}, {:c, nil}]}
    b_inputs = b.inputs -- internal
    inputs = Enum.uniq(a.inputs ++ b_inputs)
    nin = length(inputs)
    index = inputs |> Enum.with_index() |> Map.new()
    {acc, ra} = translate(a, index, {%{}, []}, nin)
    index = Enum.reduce(internal, index, &Map.put(&2, &1, ra))
    {{_, words}, rb} = translate(b, index, acc, nin)
    words = Enum.reverse(words)
    last = nin + length(words) - 1

    if nin <= @max_inputs and length(words) <= @max_instrs and ra != rb and
         last in [ra, rb] and
         not Enum.any?(a.out, &(&1 in Enum.flat_map(b_inputs, fn spec -> slots_in(spec) end))),
       do: {inputs, words, ra, rb}
  end

  # Adds program p's instructions to {seen (word => register), words
  # (reversed)}, its registers renamed (inputs by index, instructions by
  # seen); returns the new accumulator and p's result register.
  defp translate(p, index, acc, nin) do
    nin_p = length(p.inputs)
    map = p.inputs |> Enum.with_index() |> Map.new(fn {spec, k} -> {k, index[spec]} end)

    {acc, map} =
      p.words
      |> Enum.with_index(nin_p)
      |> Enum.reduce({acc, map}, fn {w, reg}, {{seen, words}, map} ->
        w = rename(w, map)

        case seen do
          %{^w => r} ->
            {{seen, words}, Map.put(map, reg, r)}

          _ ->
            r = nin + map_size(seen)
            {{Map.put(seen, w, r), [w | words]}, Map.put(map, reg, r)}
        end
      end)

    {acc, map[nin_p + length(p.words) - 1]}
  end

  # An instruction word with its operand registers renamed by map (the
  # fields it uses: a unary op's a, a binary op's or comparison's a and b
  # (a alone with a literal), a select's a, b and c).
  defp rename(w, map) do
    cls = w &&& 3
    lit = (w >>> 8 &&& 1) == 1
    field = fn shift -> map[w >>> shift &&& 127] <<< shift end
    keep = w &&& 0x1FF
    a = field.(9)

    cond do
      cls == 0 -> keep ||| a
      lit -> keep ||| a ||| (w &&& 0xFFFF0000)
      cls == 3 -> keep ||| a ||| field.(16) ||| field.(23)
      true -> keep ||| a ||| field.(16)
    end
  end

  # Runs a pair op once on scratch inputs (on_scratch/5): false when the
  # device rejects its program.
  defp pair_runs?(
         {:fused_pair, [{:c, type}, {:c, shape}, {:c, words}, {:c, reg}, {:l, specs} | _], _},
         info,
         device
       ) do
    on_scratch(type, specs, info, device, fn scratch ->
      outs = Nx.Vulkan.NIF.fused_pair(type, shape, words, reg, scratch, nil, 0, nil, 0)
      Nx.Vulkan.NIF.deallocate_many(Tuple.to_list(outs))
    end)
  end

  # {index of the program, index of the destination's empty, the
  # program's fused_into op} where op c is a copy that into_destinations/2
  # folds into the program it copies, else nil.
  defp block_write(ops, c, uses, producer) do
    with {:copy_into, [{:s, dst}, off, dst_strides, shape, {:s, src}, {:c, 0}, {:c, nil}], []} <-
           elem(ops, c),
         [off, dst_strides, shape] = Enum.map([off, dst_strides, shape], &constant/1),
         true <- is_integer(off) and off >= 0 and is_list(shape) and is_list(dst_strides),
         1 <- uses[src],
         f when is_integer(f) and f < c <- producer[src],
         {:fused, [{:c, type}, fshape | _] = specs, [^src]} <- elem(ops, f),
         fshape when is_list(fshape) <- constant(fshape),
         e when is_integer(e) and e < c <- producer[dst],
         {:empty, [_, {:c, ^type}, _] = empty_specs, [^dst]} <- elem(ops, e),
         true <- Enum.all?(empty_specs, &match?({:c, _}, &1)),
         true <- Enum.product(fshape) == Enum.product(shape) and dense?(shape, dst_strides),
         false <- dst in Enum.flat_map(specs, &slots_in/1),
         true <-
           Enum.all?(
             (f + 1)..(c - 1)//1,
             &(&1 == e or other_block?(elem(ops, &1), dst, {off, off + Enum.product(shape)}))
           ) do
      {f, e, {:fused_into, [{:s, dst}, {:c, off} | specs], []}}
    else
      _ -> nil
    end
  end

  # The value of a constant spec (a list of constants is one), else nil.
  defp constant({:c, value}), do: value

  defp constant({:l, specs}) do
    values = Enum.map(specs, &constant/1)
    if nil in values, do: nil, else: values
  end

  defp constant(_spec), do: nil

  # Whether strides (of a destination) lay shape out densely, row-major.
  defp dense?(shape, strides) when length(shape) == length(strides) do
    {dense, _} =
      List.foldr(Enum.zip(shape, strides), {true, 1}, fn {d, s}, {ok, expect} ->
        {ok and (d == 1 or s == expect), expect * d}
      end)

    dense
  end

  defp dense?(_shape, _strides), do: false

  # Whether op leaves slot dst alone but for copying into it a block that
  # does not meet elements lo..hi - 1 (the ops are fuse/5's: no
  # fused_into among them yet).
  defp other_block?({:copy_into, [{:s, dst}, off, strides, shape | rest], _out}, dst, range) do
    with [off, strides, shape] when is_integer(off) and is_list(strides) and is_list(shape) <-
           Enum.map([off, strides, shape], &constant/1),
         true <- length(strides) == length(shape) and 0 not in shape do
      # The lowest and highest element the copy writes.
      {low, high} =
        Enum.zip(shape, strides)
        |> Enum.reduce({off, off}, fn {d, st}, {low, high} ->
          {low + min(0, (d - 1) * st), high + max(0, (d - 1) * st)}
        end)

      apart?({low, high + 1}, range) and dst not in Enum.flat_map(rest, &slots_in/1)
    else
      _ -> false
    end
  end

  defp other_block?({_name, specs, out}, dst, _range),
    do: dst not in out and dst not in Enum.flat_map(specs, &slots_in/1)

  # Whether two ranges of elements [lo, hi) are disjoint.
  defp apart?({lo1, hi1}, {lo2, hi2}), do: hi1 <= lo2 or hi2 <= lo1

  # Which ops are left, each group's program checked against the device
  # (checks?/5) only once some op that stays reads its result: from the
  # last op back, an elementwise op (fused or not) or a foldable transpose
  # stays only while some op that stays, or an output, reads its result;
  # every other op stays. So a member whose every read is computed inside
  # fused programs goes (a group read only by programs that recompute it is
  # never checked), and a group the device does not support (or that
  # plan/5 rejected) keeps its members as ops of their own, which may need
  # groups that nothing needed before: those are checked in the next
  # round. tried: root => whether the device supports its program.
  defp keep(programs, tried, {ops, n, pure, needed, device} = ctx) do
    fused = for {root, {op, _}} <- programs, Map.get(tried, root, true), into: %{}, do: {root, op}

    {kept, _needed, untried} =
      Enum.reduce((n - 1)..0//-1, {[], needed, []}, fn i, {kept, needed, untried} ->
        {_, args, results} = op = Map.get(fused, i, elem(ops, i))

        if MapSet.member?(pure, i) and not Enum.any?(results, &MapSet.member?(needed, &1)) do
          {kept, needed, untried}
        else
          untried =
            if Map.has_key?(fused, i) and not Map.has_key?(tried, i),
              do: [i | untried],
              else: untried

          needed = Enum.reduce(Enum.flat_map(args, &slots_in/1), needed, &MapSet.put(&2, &1))
          {[op | kept], needed, untried}
        end
      end)

    if untried == [] do
      kept
    else
      tried =
        Enum.reduce(untried, tried, fn root, acc ->
          {_, check} = programs[root]
          Map.put(acc, root, check.(device))
        end)

      keep(programs, tried, ctx)
    end
  end

  # Operand pos of member m (being grouped) takes its producer's group
  # when the producer's result is read here densely, within the limits of
  # a program: the group goes into this one when this is its only read;
  # when other ops read it too, it is recomputed here (if it is one op or
  # only cheap ones, cheap?/2) and stays a group of its own (its result
  # then computed once more only if some read was not recomputed; see
  # keep/3).
  defp absorb({spec, off, strides}, pos, m, {group, groups} = acc, ctx) do
    {uses, producer, members, transposes} = ctx

    with {:s, slot} <- spec,
         0 <- off,
         p when p != nil <- producer[slot],
         g when g != nil <- Map.get(groups, p),
         true <- reads?(members[p], m, pos, strides),
         true <- uses[slot] == 1 or g == [p] or Enum.all?(g, &members[&1].cheap),
         true <- strides == nil or Enum.all?(g, &members[&1].cheap),
         merged = Enum.sort(Enum.uniq(group ++ g)),
         true <- length(merged) <= @max_group_instrs,
         true <- length(inputs(merged, members, producer, transposes)) <= @max_inputs do
      if uses[slot] > 1,
        do: {merged, groups},
        else: {merged, Map.delete(groups, p)}
    else
      _ -> acc
    end
  end

  # A group rooted at a comparison that no select took as its predicate
  # cannot be a program (a program's result is of its type; the
  # comparison's is u8): the comparison stays an op of its own, and the
  # groups of its operands' producers are groups again, as they were
  # before it took them in.
  defp split_comparisons(groups, taken) do
    Enum.reduce(taken, groups, fn {i, before}, acc ->
      case acc do
        %{^i => [_, _ | _]} -> acc |> Map.merge(before) |> Map.put(i, [i])
        _ -> acc
      end
    end)
  end

  defp operand_producers(m, producer) do
    for {{:s, slot}, _, _} <- m.operands, p = producer[slot], p != nil, uniq: true, do: p
  end

  # How many times each slot is read (by ops and by the outputs).
  defp count_uses(ops, out_specs) do
    specs = Enum.flat_map(Tuple.to_list(ops), fn {_, specs, _} -> specs end) ++ out_specs

    Enum.reduce(specs, %{}, fn spec, acc ->
      Enum.reduce(slots_in(spec), acc, &Map.update(&2, &1, 1, fn c -> c + 1 end))
    end)
  end

  defp slots_in({:s, i}), do: [i]
  defp slots_in({:l, specs}), do: Enum.flat_map(specs, &slots_in/1)
  defp slots_in({:t, specs}), do: Enum.flat_map(specs, &slots_in/1)
  defp slots_in(_), do: []

  ## Candidates

  # %{kind, op, cheap, shape, type, operands: [{spec, offset, strides}],
  # slot} for an elementwise op a fused program can run, else nil (cheap:
  # cheap?/2).
  defp member({:binary, [{:c, op}, shape, a, ao, as, b, bo, bs], [slot]}, info) do
    if Map.has_key?(@binary, op) or Map.has_key?(@int_binary, op),
      do: candidate(:binary, op, shape, [{a, ao, as}, {b, bo, bs}], slot, info)
  end

  defp member({:unary, [{:c, op}, shape, a, ao, as], [slot]}, info) do
    if Map.has_key?(@unary, op) or Map.has_key?(@int_unary, op),
      do: candidate(:unary, op, shape, [{a, ao, as}], slot, info)
  end

  defp member({:compare, [{:c, op}, shape, a, ao, as, b, bo, bs], [slot]}, info) do
    if Map.has_key?(@compare, op),
      do: candidate(:compare, op, shape, [{a, ao, as}, {b, bo, bs}], slot, info)
  end

  defp member({:select, [shape, p, po, ps, a, ao, as, b, bo, bs], [slot]}, info),
    do: candidate(:select, 0, shape, [{p, po, ps}, {a, ao, as}, {b, bo, bs}], slot, info)

  defp member(_op, _info), do: nil

  defp candidate(kind, op, shape, operands, slot, info) do
    with {:ok, shape} <- int_list(shape),
         {:ok, operands} <- operands(operands),
         {type, _count} <- info.({:s, slot}) do
      # A comparison's type is that of its operands (its result is u8).
      type =
        if kind == :compare,
          do: operands |> Enum.reject(&immediate?/1) |> hd() |> operand_type(info),
          else: type

      index = op_index(kind, op, type)
      operands = commute(kind, op, type, operands)

      if index != nil do
        if operand_types_ok?(kind, operands, type, info),
          do: %{
            kind: kind,
            op: index,
            cheap: cheap?(kind, op),
            shape: shape,
            type: type,
            operands: operands,
            lit: literal(kind, type, operands),
            slot: slot
          }
      end
    else
      _ -> nil
    end
  end

  # Ops of one or a few instructions: a group of them is recomputed in
  # each fused op that reads it (absorb/5) at no cost that matters beside
  # the memory traffic it saves. Divisions, powers and transcendental
  # functions are not: a group holding one is recomputed only if it is
  # that op alone.
  @cheap_binary [:add, :subtract, :multiply, :max, :min] ++
                  [:bitwise_and, :bitwise_or, :bitwise_xor, :left_shift, :right_shift]
  @cheap_unary [:copy, :negate, :abs, :sign, :bitwise_not, :square, :floor, :ceil, :round]

  defp cheap?(:binary, op), do: op in @cheap_binary
  defp cheap?(:unary, op), do: op in @cheap_unary
  defp cheap?(kind, _op), do: kind in [:compare, :select]

  # The op's number in a fused program of type, or nil when such
  # programs do not run it.
  defp op_index(:select, _op, type) when type in @float_types or type in @int_types, do: 0
  defp op_index(:binary, op, type) when type in @float_types, do: @binary[op]
  defp op_index(:unary, op, type) when type in @float_types, do: @unary[op]
  defp op_index(:compare, op, type) when type in @float_types, do: @compare[op]
  defp op_index(:binary, op, type) when type in @int_types, do: @int_binary[op]
  defp op_index(:unary, op, type) when type in @int_types, do: @int_unary[op]
  defp op_index(:compare, op, type) when type in @int_types, do: @compare[op]
  defp op_index(_kind, _op, _type), do: nil

  defp immediate?({{:imm, _}, _, _}), do: true
  defp immediate?(_operand), do: false

  # c op x as x op c for the binary ops whose operands commute bitwise
  # (float sums and products; integer sums, products, bitwise ops, max and
  # min), so that the number may be a literal.
  @commute_float [:add, :multiply]
  @commute_int @commute_float ++ [:bitwise_and, :bitwise_or, :bitwise_xor, :max, :min]

  defp commute(:binary, op, type, [c, x] = operands) do
    ops = if type in @int_types, do: @commute_int, else: @commute_float

    if op in ops and immediate?(c) and not immediate?(x),
      do: [x, c],
      else: operands
  end

  defp commute(_kind, _op, _type, operands), do: operands

  # The literal bits (nxv_fused in nxv.h) of a binary op's or comparison's
  # second operand, when it is a number that 16 bits hold; else nil.
  defp literal(kind, type, [_x, {{:imm, bytes}, 0, nil}]) when kind in [:binary, :compare],
    do: literal_bits(type, bytes)

  defp literal(_kind, _type, _operands), do: nil

  # For integers the value as int16 (signed types) or uint16 (unsigned);
  # for floats the f16 bits of a normal number or a zero that is exactly
  # the value (its bytes rebuilt from the f16 are the bytes given, so a
  # negative zero stays one).
  defp literal_bits(type, bytes) when type in [:s32, :s64] do
    size = bit_size(bytes)
    <<v::signed-size(size)-native>> = bytes
    if v >= -0x8000 and v <= 0x7FFF, do: v &&& 0xFFFF
  end

  defp literal_bits(type, bytes) when type in [:u32, :u64] do
    size = bit_size(bytes)
    <<v::unsigned-size(size)-native>> = bytes
    if v <= 0xFFFF, do: v
  end

  defp literal_bits(type, bytes) when type in @float_types do
    with {:ok, v} <- float_value(type, bytes),
         {:ok, h} <- f16_bits(v),
         true <- float_bytes(type, half_value(h)) == bytes do
      h
    else
      _ -> nil
    end
  end

  defp literal_bits(_type, _bytes), do: nil

  defp float_value(:f16, <<h::16-native>>), do: half(h)
  defp float_value(:bf16, <<b::16-native>>), do: single(<<b::16, 0::16>>)
  # (A NaN or an infinity matches no float pattern.)
  defp float_value(:f32, <<v::float-32-native>>), do: {:ok, v}
  defp float_value(:f64, <<v::float-64-native>>), do: {:ok, v}
  defp float_value(_type, _bytes), do: :error

  defp single(<<v::float-32>>), do: {:ok, v}
  defp single(_nan_or_infinity), do: :error

  # A normal f16 or a zero (fused.comp converts those exactly).
  defp half(h) do
    e = h >>> 10 &&& 31

    if e == 31 or (e == 0 and (h &&& 0x3FF) != 0),
      do: :error,
      else: {:ok, half_value(h)}
  end

  defp half_value(h) do
    <<v::float-16>> = <<h::16>>
    v
  end

  # (A float past f16's range becomes an infinity, which half/1 refuses.)
  defp f16_bits(v) do
    <<h::16>> = <<v::float-16>>
    with {:ok, _} <- half(h), do: {:ok, h}
  end

  defp float_bytes(:f16, v), do: <<v::float-16-native>>
  defp float_bytes(:f32, v), do: <<v::float-32-native>>
  defp float_bytes(:f64, v), do: <<v::float-64-native>>

  defp float_bytes(:bf16, v) do
    <<hi::16, lo::16>> = <<v::float-32>>
    if lo == 0, do: <<hi::16-native>>, else: nil
  end

  defp operand_type({spec, _, _}, info) do
    case info.(spec) do
      {type, _} -> type
      nil -> nil
    end
  end

  # Every operand is of the program's type, except a select's predicate
  # (u8; only a fused comparison can be one). An immediate (a binary or
  # comparison's one-element value, its bytes already of the operation's
  # type) becomes an immediate input of the program (`Nx.Vulkan.NIF.fused/4`
  # takes its bytes).
  defp operand_types_ok?(:select, [_p | rest], type, info),
    do: Enum.all?(rest, &(operand_type(&1, info) == type))

  defp operand_types_ok?(_kind, operands, type, info),
    do: Enum.all?(operands, &(immediate?(&1) or operand_type(&1, info) == type))

  # [{spec, offset, strides}] of an op's operand specs; an immediate
  # operand (a binary) becomes {{:imm, bytes}, 0, nil}.
  defp operands(list) do
    Enum.reduce_while(list, {:ok, []}, fn
      {{:c, bytes}, {:c, 0}, {:c, nil}}, {:ok, acc} when is_binary(bytes) ->
        {:cont, {:ok, acc ++ [{{:imm, bytes}, 0, nil}]}}

      {spec, {:c, off}, strides}, {:ok, acc} ->
        with true <- is_integer(off),
             {:ok, strides} <- strides(strides) do
          {:cont, {:ok, acc ++ [{spec, off, strides}]}}
        else
          _ -> {:halt, :error}
        end
    end)
  end

  defp strides({:c, nil}), do: {:ok, nil}
  defp strides(spec), do: int_list(spec)

  defp int_list({:l, specs}) do
    if Enum.all?(specs, &match?({:c, i} when is_integer(i), &1)),
      do: {:ok, Enum.map(specs, fn {:c, i} -> i end)},
      else: :error
  end

  defp int_list(_), do: :error

  # Whether producer p, read through strides (nil: densely), can feed
  # operand pos of consumer m inside one program: read densely, as
  # links?/3 says; read as a broadcast (every stride 0) when p has one
  # element (a scalar: a threefry key word, a step size), of m's type and
  # no comparison, so that its group is computed at every element of m's
  # program from broadcast reads of its inputs (absorb/5 takes only groups
  # of cheap ops that way).
  defp reads?(p, m, pos, nil), do: links?(p, m, pos)

  defp reads?(p, m, _pos, strides) when is_list(strides) and p != nil do
    scalar?(p.shape) and p.shape != m.shape and p.type == m.type and p.kind != :compare and
      length(strides) == length(m.shape) and Enum.all?(strides, &(&1 == 0))
  end

  defp reads?(_p, _m, _pos, _strides), do: false

  defp scalar?(shape), do: Enum.all?(shape, &(&1 == 1))

  # Whether producer p can feed operand pos of consumer m inside one
  # program: same shape (or one element each: a slice of one element
  # read as a number, whose reads the program makes at that element's
  # offset) and type; a comparison only as a select's predicate,
  # anything else only as a value.
  defp links?(nil, _m, _pos), do: false

  defp links?(p, m, pos) do
    (p.shape == m.shape or (scalar?(p.shape) and scalar?(m.shape))) and p.type == m.type and
      p.kind == :compare == (m.kind == :select and pos == 0)
  end

  # A transpose of a dense tensor read once: {slot, {input spec, strides,
  # type, output shape}} with the strides that read its input in the
  # output's order.
  defp transpose_view({:transpose, [in_shape, a, perm], [slot]}, uses, info) do
    with 1 <- uses[slot],
         {:ok, in_shape} <- int_list(in_shape),
         {:ok, perm} <- int_list(perm),
         {type, _} <- info.(a) do
      dense =
        in_shape
        |> Enum.reverse()
        |> Enum.map_reduce(1, fn d, s -> {s, s * d} end)
        |> elem(0)
        |> Enum.reverse()
        |> List.to_tuple()

      out_shape = Enum.map(perm, &Enum.at(in_shape, &1))
      {slot, {a, Enum.map(perm, &elem(dense, &1)), type, out_shape}}
    else
      _ -> nil
    end
  end

  defp transpose_view(_op, _uses, _info), do: nil

  ## Programs

  # The external operands of a group, in first-use order, as the program
  # reads them (input/4): [{spec, offset, strides}].
  defp inputs(group, members, producer, transposes) do
    in_group = MapSet.new(group)
    shape = members[List.last(group)].shape

    group
    |> Enum.flat_map(fn i ->
      m = members[i]

      m.operands
      |> Enum.with_index()
      |> Enum.reject(fn {op, pos} ->
        internal?(op, in_group, producer, members) or literal?(m, pos)
      end)
      |> Enum.map(&input(elem(&1, 0), m, shape, transposes))
    end)
    |> Enum.uniq()
  end

  # External operand operand of member m, read by a program over shape
  # (its root's): with a transpose read once folded in; for a member of
  # another shape (a scalar, reads?/4) as a broadcast of its one element.
  defp input(operand, %{shape: shape}, shape, transposes),
    do: fold_transpose(operand, shape, transposes)

  defp input({{:imm, _}, _, _} = operand, _m, _shape, _transposes), do: operand

  defp input({spec, off, _}, _m, shape, _transposes),
    do: {spec, off, Enum.map(shape, fn _ -> 0 end)}

  # Whether operand pos of member m is a literal of its instruction.
  defp literal?(%{lit: lit}, 1), do: lit != nil
  defp literal?(_m, _pos), do: false

  # A dense read of a result the group computes is a register, and so is a
  # broadcast of a scalar result it computes (reads?/4); any other read of
  # it (a view: transposed, sliced, broadcast) reads its buffer, an input,
  # so that result is computed on its own as well.
  defp internal?({{:s, slot}, 0, nil}, in_group, producer, _members),
    do: MapSet.member?(in_group, producer[slot])

  defp internal?({{:s, slot}, 0, strides}, in_group, producer, members) when is_list(strides) do
    p = producer[slot]

    MapSet.member?(in_group, p) and scalar?(members[p].shape) and
      Enum.all?(strides, &(&1 == 0))
  end

  defp internal?(_operand, _in_group, _producer, _members), do: false

  # A dense read of a transpose's result is a read of its input with
  # strides, where the reader's shape is the transpose's (not a reshape of
  # it: those strides would read other elements).
  defp fold_transpose({{:s, slot}, 0, nil} = operand, shape, transposes) do
    case transposes do
      %{^slot => {a, strides, _type, ^shape}} -> {a, 0, strides}
      _ -> operand
    end
  end

  defp fold_transpose(operand, _shape, _transposes), do: operand

  # The transpose ops a group's inputs fold in.
  defp absorbed(group, members, producer, transposes) do
    in_group = MapSet.new(group)

    for i <- group,
        {{:s, slot}, 0, nil} = op <- members[i].operands,
        not internal?(op, in_group, producer, members),
        fold_transpose(op, members[i].shape, transposes) != op,
        uniq: true,
        do: producer[slot]
  end

  defp absorbs_transpose?(group, members, producer, transposes),
    do: absorbed(group, members, producer, transposes) != []

  @classes %{unary: 0, binary: 1, compare: 2, select: 3}

  # The fused plan op of a group, and a function of the device that tells
  # whether the device supports its program (checks?/5).
  defp program(root, group, members, producer, transposes) do
    inputs = inputs(group, members, producer, transposes)
    nin = length(inputs)
    input_reg = inputs |> Enum.with_index() |> Map.new()
    reg = group |> Enum.with_index(nin) |> Map.new(fn {i, r} -> {members[i].slot, r} end)
    in_group = MapSet.new(group)

    words =
      for i <- group do
        m = members[i]

        regs =
          Enum.map(m.operands, fn {spec, _, _} = operand ->
            if internal?(operand, in_group, producer, members),
              do: reg[elem(spec, 1)],
              else: input_reg[input(operand, m, members[root].shape, transposes)]
          end)

        [a, b, c] = regs ++ List.duplicate(0, 3 - length(regs))
        cls_op = @classes[m.kind] ||| m.op <<< 2

        if m.lit != nil,
          do: cls_op ||| 1 <<< 8 ||| a <<< 9 ||| m.lit <<< 16,
          else: cls_op ||| a <<< 9 ||| b <<< 16 ||| c <<< 23
      end

    %{type: type, shape: shape, slot: slot} = members[root]

    input_specs =
      Enum.map(inputs, fn
        {{:imm, bytes}, 0, nil} -> {:c, bytes}
        {spec, off, strides} -> {:t, [spec, {:c, off}, {:c, strides}]}
      end)

    op = {:fused, [{:c, type}, {:c, shape}, {:c, words}, {:l, input_specs}], [slot]}
    {op, &checks?(type, nin, words, 0, &1)}
  end

  # Whether the device supports a program of words over ninputs inputs of
  # type, of one result (second 0) or two (second the second's register):
  # Nx.Vulkan.NIF.fused_check/5, which creates no pipeline.
  defp checks?(type, ninputs, words, second, device) do
    dev = Nx.Vulkan.device(device || Nx.Vulkan.default_device_index())
    Nx.Vulkan.NIF.fused_check(dev, type, ninputs, words, second) == :ok
  rescue
    _ in [ArgumentError, Nx.Vulkan.Error] -> false
  end

  # Runs a program of one result once on scratch inputs of the real sizes
  # and layouts (input specs as its fused op holds them): false when the
  # device rejects it (an op it lacks, its table of programs full). This
  # also starts the creation of the program's pipeline, which the device's
  # pipeline threads carry on in the background (with `pipeline_threads:
  # :off`, created here; a failed creation is then a rejection).
  defp runs?(type, shape, words, inputs, info, device) do
    on_scratch(type, inputs, info, device, fn scratch ->
      Nx.Vulkan.NIF.deallocate(Nx.Vulkan.NIF.fused(type, shape, words, scratch))
    end)
  end

  # Calls run with scratch inputs for a program op's input specs ({:c,
  # bytes} immediates, or {:t, [spec, {:c, offset}, {:c, strides}]} views,
  # each spec's tensor made empty at its real size, freed after): true
  # when run returns, false when it raises as the NIFs do on a rejected
  # program.
  defp on_scratch(type, specs, info, device, run) do
    index = device || Nx.Vulkan.default_device_index()
    dev = Nx.Vulkan.device(index)

    scratch =
      Enum.map(specs, fn
        {:c, bytes} when is_binary(bytes) ->
          bytes

        {:t, [spec, {:c, off}, {:c, strides}]} ->
          {^type, count} = info.(spec)
          {Nx.Vulkan.NIF.empty(dev, type, count), off, strides}
      end)

    try do
      run.(scratch)
      true
    rescue
      _ in [ArgumentError, Nx.Vulkan.Error] -> false
    after
      for {ref, _, _} <- scratch, do: Nx.Vulkan.NIF.deallocate(ref)
    end
  rescue
    # A spec without a known size, or no memory for the scratch inputs.
    _ in [MatchError, ArgumentError, Nx.Vulkan.Error] -> false
  end
end
