defmodule Nx.Vulkan.Fusion do
  @moduledoc false
  # Elementwise fusion of the ops of a Nx.Vulkan.Compiler plan.
  #
  # A plan op is {name, arg_specs, result_slots} (see the compiler). Ops
  # of the same output shape and type (a float type, or s32, s64, u32 or
  # u64) that form a tree, each result read by exactly one other op of the
  # tree, densely, become one `Nx.Vulkan.NIF.fused/4` call: unary and
  # binary ops (of integers, those that keep the type), comparisons read
  # as a select's predicate, and selects. A transpose whose only use
  # is a dense read by a fused op is folded into that read (strides). An
  # op of its own whose result several fused ops read is recomputed in
  # each, and dropped when no other op reads it. The fused kernel computes
  # bitwise what the ops compute one kernel each (nxv_fused in nxv.h), so
  # a replay returns what the evaluation did.
  #
  # Each group is tried once while planning, on scratch inputs of the real
  # sizes and layouts: a program the device rejects (or one past the
  # per-device program limit) keeps its ops unfused.

  import Bitwise

  @float_types [:f16, :bf16, :f32, :f64]
  @int_types [:s32, :s64, :u32, :u64]
  @max_inputs 12
  @max_instrs 16

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
  Fuses the elementwise ops of `ops` (in order, as the compiler plans
  them). `out_specs` are the plan's output specs (their slots count as
  uses), `info` maps a spec to its tensor's `{type, count}` (nil when
  unknown), `device` is the plan's device index (nil: the default).
  """
  def fuse(ops, out_specs, info, device) do
    ops = List.to_tuple(ops)
    n = tuple_size(ops)
    uses = count_uses(ops, out_specs)

    producer = for i <- 0..(n - 1)//1, slot <- elem(elem(ops, i), 2), into: %{}, do: {slot, i}

    members =
      for i <- 0..(n - 1)//1,
          m = member(elem(ops, i), info, device),
          into: %{},
          do: {i, m}

    transposes =
      for i <- 0..(n - 1)//1,
          t = transpose_view(elem(ops, i), uses, info),
          into: %{},
          do: t

    # Groups by root, built in op order: an op takes the groups of the
    # operands it may absorb. A group is {members, dups}: dups lists the
    # slots of members recomputed here although other ops read them too
    # (one entry per read), see absorb/5.
    groups =
      Enum.reduce(Enum.sort(Map.keys(members)), %{}, fn i, groups ->
        m = members[i]
        ctx = {uses, producer, members, transposes}

        {group, groups} =
          m.operands
          |> Enum.with_index()
          |> Enum.reduce({{[i], []}, groups}, fn {operand, pos}, acc ->
            absorb(operand, pos, m, acc, ctx)
          end)

        Map.put(groups, i, group)
      end)

    fused =
      for {root, {group, _dups}} <- groups,
          members[root].kind != :compare,
          length(group) > 1 or absorbs_transpose?(group, members, producer, transposes),
          op = fused_op(root, group, members, producer, transposes, info, device),
          into: %{},
          do: {root, op}

    # A recomputed op goes when every read of its result is recomputed in
    # a fused op.
    recomputed =
      for {root, _} <- fused, slot <- elem(groups[root], 1), reduce: %{} do
        acc -> Map.update(acc, slot, 1, &(&1 + 1))
      end

    dropped = for {slot, c} <- recomputed, c == uses[slot], do: producer[slot]

    removed =
      for {root, _} <- fused,
          {group, dups} = groups[root],
          dup_ops = Enum.map(dups, &producer[&1]),
          i <- (group -- dup_ops) ++ absorbed(group, members, producer, transposes),
          i != root,
          into: MapSet.new(dropped),
          do: i

    for i <- 0..(n - 1)//1, not MapSet.member?(removed, i) do
      Map.get(fused, i, elem(ops, i))
    end
  end

  # Operand pos of member m (being grouped) takes its producer's group
  # when the producer's result is read here densely: the whole group when
  # this is its only read, or (recomputed) a producer that is a group of
  # its own when its result is read elsewhere too. Within the limits of a
  # program.
  defp absorb({spec, off, strides}, pos, m, {{group, dups}, groups} = acc, ctx) do
    {uses, producer, members, transposes} = ctx

    with {:s, slot} <- spec,
         0 <- off,
         nil <- strides,
         p when p != nil <- producer[slot],
         {g, g_dups} <- Map.get(groups, p),
         true <- links?(members[p], m, pos),
         shared = uses[slot] > 1,
         true <- not shared or g == [p],
         merged = Enum.sort(Enum.uniq(group ++ g)),
         true <- length(merged) <= @max_instrs,
         true <- length(inputs(merged, members, producer, transposes)) <= @max_inputs do
      if shared,
        do: {{merged, [slot | dups]}, groups},
        else: {{merged, g_dups ++ dups}, Map.delete(groups, p)}
    else
      _ -> acc
    end
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

  # %{kind, op, shape, type, operands: [{spec, offset, strides}], slot}
  # for an elementwise op a fused program can run, else nil.
  defp member({:binary, [{:c, op}, shape, a, ao, as, b, bo, bs], [slot]}, info, device) do
    if Map.has_key?(@binary, op) or Map.has_key?(@int_binary, op),
      do: candidate(:binary, op, shape, [{a, ao, as}, {b, bo, bs}], slot, info, device)
  end

  defp member({:unary, [{:c, op}, shape, a, ao, as], [slot]}, info, device) do
    if Map.has_key?(@unary, op) or Map.has_key?(@int_unary, op),
      do: candidate(:unary, op, shape, [{a, ao, as}], slot, info, device)
  end

  defp member({:compare, [{:c, op}, shape, a, ao, as, b, bo, bs], [slot]}, info, device) do
    if Map.has_key?(@compare, op),
      do: candidate(:compare, op, shape, [{a, ao, as}, {b, bo, bs}], slot, info, device)
  end

  defp member({:select, [shape, p, po, ps, a, ao, as, b, bo, bs], [slot]}, info, device),
    do: candidate(:select, 0, shape, [{p, po, ps}, {a, ao, as}, {b, bo, bs}], slot, info, device)

  defp member(_op, _info, _device), do: nil

  defp candidate(kind, op, shape, operands, slot, info, device) do
    with {:ok, shape} <- int_list(shape),
         {:ok, operands} <- operands(operands),
         {type, _count} <- info.({:s, slot}) do
      # A comparison's type is that of its operands (its result is u8).
      type =
        if kind == :compare,
          do: operands |> Enum.reject(&immediate?/1) |> hd() |> operand_type(info),
          else: type

      index = op_index(kind, op, type)

      if index != nil do
        operands = Enum.map(operands, &immediate_input(&1, type, shape, device))

        if operand_types_ok?(kind, operands, type, info),
          do: %{kind: kind, op: index, shape: shape, type: type, operands: operands, slot: slot}
      end
    else
      _ -> nil
    end
  end

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

  # A fused program reads its inputs from buffers: an immediate operand (a
  # binary or comparison's one-element value) becomes the scalar cache's
  # buffer of that value, read with stride 0 along every axis.
  defp immediate_input({{:imm, bytes}, 0, nil}, type, shape, device) do
    ref = Nx.Vulkan.Backend.__scalar_buffer__(device, type, bytes)
    {{:c, ref}, 0, if(shape == [], do: nil, else: List.duplicate(0, length(shape)))}
  end

  defp immediate_input(operand, _type, _shape, _device), do: operand

  defp operand_type({spec, _, _}, info) do
    case info.(spec) do
      {type, _} -> type
      nil -> nil
    end
  end

  # Every operand is of the program's type, except a select's predicate
  # (u8; only a fused comparison can be one).
  defp operand_types_ok?(:select, [_p | rest], type, info),
    do: Enum.all?(rest, &(operand_type(&1, info) == type))

  defp operand_types_ok?(_kind, operands, type, info),
    do: Enum.all?(operands, &(operand_type(&1, info) == type))

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

  # Whether producer p can feed operand pos of consumer m inside one
  # program: same shape and type; a comparison only as a select's
  # predicate, anything else only as a value.
  defp links?(nil, _m, _pos), do: false

  defp links?(p, m, pos) do
    p.shape == m.shape and p.type == m.type and
      p.kind == :compare == (m.kind == :select and pos == 0)
  end

  # A transpose of a dense tensor read once: {slot, {input spec, strides,
  # type}} with the strides that read its input in the output's order.
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

      {slot, {a, Enum.map(perm, &elem(dense, &1)), type}}
    else
      _ -> nil
    end
  end

  defp transpose_view(_op, _uses, _info), do: nil

  ## Programs

  # The external operands of a group, in first-use order, with transposes
  # read once folded in: [{spec, offset, strides}].
  defp inputs(group, members, producer, transposes) do
    in_group = MapSet.new(group)

    group
    |> Enum.flat_map(fn i ->
      Enum.reject(members[i].operands, &internal?(&1, in_group, producer))
    end)
    |> Enum.map(&fold_transpose(&1, transposes))
    |> Enum.uniq()
  end

  defp internal?({{:s, slot}, _, _}, in_group, producer),
    do: MapSet.member?(in_group, producer[slot])

  defp internal?(_operand, _in_group, _producer), do: false

  defp fold_transpose({{:s, slot}, 0, nil} = operand, transposes) do
    case transposes do
      %{^slot => {a, strides, _type}} -> {a, 0, strides}
      _ -> operand
    end
  end

  defp fold_transpose(operand, _transposes), do: operand

  # The transpose ops a group's inputs fold in.
  defp absorbed(group, members, producer, transposes) do
    in_group = MapSet.new(group)

    for i <- group,
        {{:s, slot}, 0, nil} = op <- members[i].operands,
        not internal?(op, in_group, producer),
        Map.has_key?(transposes, slot),
        uniq: true,
        do: producer[slot]
  end

  defp absorbs_transpose?(group, members, producer, transposes),
    do: absorbed(group, members, producer, transposes) != []

  @classes %{unary: 0, binary: 1, compare: 2, select: 3}

  # The fused plan op of a group, or nil when the device rejects it.
  defp fused_op(root, group, members, producer, transposes, info, device) do
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
            if internal?(operand, in_group, producer),
              do: reg[elem(spec, 1)],
              else: input_reg[fold_transpose(operand, transposes)]
          end)

        [a, b, c] = regs ++ List.duplicate(0, 3 - length(regs))
        @classes[m.kind] ||| m.op <<< 2 ||| a <<< 8 ||| b <<< 13 ||| c <<< 18
      end

    %{type: type, shape: shape, slot: slot} = members[root]

    if runs?(type, shape, words, inputs, info, device) do
      input_specs =
        Enum.map(inputs, fn {spec, off, strides} ->
          {:t, [spec, {:c, off}, {:c, strides}]}
        end)

      {:fused, [{:c, type}, {:c, shape}, {:c, words}, {:l, input_specs}], [slot]}
    end
  end

  # Runs the program once on scratch inputs of the real sizes and layouts:
  # false when the device rejects it (an op it lacks, its table of programs
  # full). This also starts the creation of the program's pipeline, which
  # the device's pipeline threads carry on in the background while the
  # plan is built (with `pipeline_threads: :off`, created here; a failed
  # creation is then a rejection).
  defp runs?(type, shape, words, inputs, info, device) do
    index = device || Nx.Vulkan.default_device_index()
    dev = Nx.Vulkan.device(index)

    scratch =
      Enum.map(inputs, fn {spec, off, strides} ->
        {^type, count} = info.(spec)
        {Nx.Vulkan.NIF.empty(dev, type, count), off, strides}
      end)

    try do
      out = Nx.Vulkan.NIF.fused(type, shape, words, scratch)
      Nx.Vulkan.NIF.deallocate(out)
      true
    rescue
      _ in [ArgumentError, Nx.Vulkan.Error] -> false
    after
      Enum.each(scratch, fn {ref, _, _} -> Nx.Vulkan.NIF.deallocate(ref) end)
    end
  rescue
    # A spec without a known size, or no memory for the scratch inputs.
    _ in [MatchError, ArgumentError, Nx.Vulkan.Error] -> false
  end
end
