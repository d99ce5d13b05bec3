if Code.ensure_loaded?(Nx.Defn.Evaluator) do
  defmodule Nx.Vulkan.Compiler do
    @moduledoc """
    A `defn` compiler for `Nx.Vulkan.Backend`: it traces each function
    once per argument shape and then replays the device calls of its
    evaluation.

        Nx.default_backend(Nx.Vulkan.Backend)
        Nx.Defn.global_default_options(compiler: Nx.Vulkan.Compiler)

        # or for one function
        step = Nx.Defn.jit(&MyModel.step/3, compiler: Nx.Vulkan.Compiler)

    `Nx.Defn.Evaluator` traces the Elixir code of a `defn` into an
    expression, differentiates it where `grad`/`value_and_grad` ask, and
    evaluates the expression node by node through the backend's
    callbacks, on every call. For a training step of a small model the
    host time of all that is several times the device time. This compiler:

      1. keeps the traced expression (with the evaluator's use counts)
         keyed by the function, the type, shape and names of each argument
         and the options, as `EXLA` keeps its executables;
      2. evaluates it the first time with `Nx.Defn.Evaluator` while
         logging the device calls the backend makes (`Nx.Vulkan.NIF`), and
         turns the log into a plan: calls that depend on no argument
         (constants, iotas, their conversions) are done once and their
         results kept; the rest become a list of calls whose tensor
         arguments are the call's arguments or earlier results;
      3. fuses chains of elementwise ops of the plan into single kernels
         (`Nx.Vulkan.NIF.fused/4`; `config :nx_vulkan, compiler_fusion:
         false` turns it off) and orders its calls by their depth in the
         dependency graph, so that independent calls are queued between
         the same barriers;
      4. on later calls with arguments of the same kind (all tensors of
         `Nx.Vulkan.Backend`, on the same devices, the same known constant
         values, the same default backend) replays the plan in one NIF
         call (`Nx.Vulkan.NIF.replay/2`), which makes the device ops'
         calls in C: no tracing, no expression walk, no backend
         bookkeeping and no Elixir code between device ops.
         (`config :nx_vulkan, compiler_native_replay: false` replays
         call by call from Elixir instead, as do plans with calls that
         `replay/2` may not make.)

    The replay computes what the evaluation computed, op for op (a fused
    kernel's results are bitwise those of its ops), so its results are
    the Evaluator's. Loops and branches (`while`, `cond`, and the loops
    inside `Nx.Random`) are replayed when their conditions were decided
    on the host: the backend computes the integer arithmetic and
    comparisons of one-element constants on the host, so a loop on a
    counter runs the same iterations on every call with the same known
    argument values, which key the plan. An evaluation that reads device
    data back (a condition on device data, host fallbacks), that has hooks
    or tokens, or whose loops would keep more than 65536 calls or 256 MiB
    of results in its log is not replayable: such functions are evaluated by
    `Nx.Defn.Evaluator` on every call, with the expression still cached.
    Arguments of other backends are evaluated the same way.

    Options are the Evaluator's (`:max_concurrency`, `:hooks`,
    `:garbage_collect`). A replay deallocates its intermediate tensors as
    soon as no later call reads them, but the tensors it returns (a
    training step's new parameters) are freed only when the process that
    dropped them collects garbage, and a replay makes little garbage. So
    the calling process collects once the results returned since its last
    collection reach `config :nx_vulkan, compiler_gc_bytes: bytes` (64 MiB
    by default; `:infinity` never), and after every replay with
    `garbage_collect: true`.

    Expressions and plans are kept in `:persistent_term` (read without
    copying), up to #{512} entries per VM; beyond that the cache is emptied
    and refilled. Any process may call a compiled function concurrently.
    """

    @behaviour Nx.Defn.Compiler

    alias Nx.Defn.Evaluator
    alias Nx.Vulkan.Capture

    @max_entries 512
    @gc_bytes 64 * 1024 * 1024
    @count_key {__MODULE__, :count}

    # NIF calls that read data back, wait or change device state: an
    # evaluation making one is not replayable.
    @abort [:download, :synchronize, :trim, :save_pipeline_cache, :inject_fault, :open_device]

    # NIF calls whose results only steer the backend's choices, which the
    # plan has already taken.
    @query [
      :device_count,
      :default_device_index,
      :device_info,
      :device_stats,
      :device_status,
      :supported,
      :tensor_info
    ]

    # NIF calls that write into their first argument.
    @mutating [:copy_into, :fused_into, :deallocate, :deallocate_many]

    # NIF calls whose result is written later (by copy_into): never done
    # once for all calls.
    @fresh [:empty]

    # Expression ops whose evaluation runs Elixir code between device calls.
    @unplannable_ops [:token, :attach_token]

    # Control flow: planned when its conditions were read without a
    # download (the backend keeps the integer arithmetic and comparisons
    # of constants on the host, as a loop's counter), so that which
    # branches and how many iterations ran depends only on the expression
    # and the arguments' known values, which the plan's key holds. A loop
    # is logged iteration by iteration: its capture gives up past
    # @loop_limits (calls, bytes of results the log keeps alive).
    @control_ops [:while, :cond]
    @loop_limits {65_536, 256 * 1024 * 1024}

    @impl true
    def __partitions_options__(opts), do: Evaluator.__partitions_options__(opts)

    @impl true
    def __to_backend__(opts), do: Evaluator.__to_backend__(opts)

    @impl true
    def __stream__(key, input, acc, vars, fun, args_list, opts),
      do: Evaluator.__stream__(key, input, acc, vars, fun, args_list, opts)

    @impl true
    def __jit__(key, vars, fun, args_list, opts) do
      __compile__(key, vars, fun, opts).(args_list)
    end

    @impl true
    def __compile__(key, vars, fun, opts) do
      cache_key = {__MODULE__, key, templates(vars), opts}

      case :persistent_term.get(cache_key, nil) do
        nil ->
          compiled = compile(cache_key, vars, fun, opts)
          store(cache_key, compiled)
          compiled

        compiled ->
          compiled
      end
    end

    @doc "The number of cached expressions and plans."
    @spec cache_size() :: non_neg_integer
    def cache_size, do: :persistent_term.get(@count_key, 0)

    @doc "Empties the cache of expressions and plans."
    @spec clear_cache() :: :ok
    def clear_cache do
      for {k, _} <- :persistent_term.get(), cache_entry?(k), do: :persistent_term.erase(k)
      :persistent_term.put(@count_key, 0)
      :ok
    end

    # Expressions are {__MODULE__, key, templates, opts}, plans
    # {__MODULE__, :plan, expression key, signature}.
    defp cache_entry?({__MODULE__, _, _, _}), do: true
    defp cache_entry?(_), do: false

    defp compile(cache_key, vars, fun, opts) do
      # Tracing runs in this process: note whether the expression has
      # control flow or hooks that make it unplannable.
      traced = fn vars ->
        expr = fun.(vars)
        Process.put({__MODULE__, :plannable}, plannable(expr))
        expr
      end

      evaluate = Evaluator.__compile__(elem(cache_key, 1), vars, traced, opts)

      case Process.delete({__MODULE__, :plannable}) do
        false ->
          evaluate

        kind ->
          gc? = Keyword.get(opts, :garbage_collect, false)
          limits = if kind == :control, do: @loop_limits, else: :infinity
          fn [params] -> run(cache_key, evaluate, params, gc?, limits) end
      end
    end

    # Evaluates with the plan for these arguments, making it on the first
    # call.
    defp run(cache_key, evaluate, params, gc?, limits) do
      tensors = Enum.map(params, & &1.())
      thunks = Enum.map(tensors, &fn -> &1 end)
      capturing = Capture.capturing?()

      case signature(tensors) do
        _ when capturing ->
          # Called while another compiled function is being captured (from
          # a backend callback): this call's device work would be missing
          # from, or replayed outside, the outer log.
          Capture.abort()
          evaluate.([thunks])

        :error ->
          evaluate.([thunks])

        {:ok, signature} ->
          plan_key = {__MODULE__, :plan, cache_key, signature}

          case :persistent_term.get(plan_key, nil) do
            nil ->
              {[result], captured} = Capture.capture(fn -> evaluate.([thunks]) end, limits)

              plan =
                case captured do
                  {:ok, calls} -> make_plan(calls, tensors, result)
                  :aborted -> :none
                end

              if plan != :retry, do: store(plan_key, plan)
              [result]

            :none ->
              evaluate.([thunks])

            plan ->
              result = replay(plan, tensors)
              collect(gc?, result)
              [result]
          end
      end
    end

    # After a replay: collects garbage always with garbage_collect: true,
    # otherwise once the results returned since the last collection reach
    # :compiler_gc_bytes (the dropped results of earlier calls, such as
    # old parameters, hold device buffers until the process collects).
    defp collect(true, _result), do: :erlang.garbage_collect(self())

    defp collect(false, result) do
      limit = Application.get_env(:nx_vulkan, :compiler_gc_bytes, @gc_bytes)
      bytes = Nx.Defn.Composite.reduce(result, 0, fn t, acc -> acc + Nx.byte_size(t) end)
      total = (Process.get({__MODULE__, :returned_bytes}) || 0) + bytes

      if is_integer(limit) and total >= limit do
        :erlang.garbage_collect(self())
        Process.put({__MODULE__, :returned_bytes}, 0)
      else
        Process.put({__MODULE__, :returned_bytes}, total)
      end

      :ok
    end

    # What the backend's choices may depend on beyond the templates: the
    # device and known value of each argument, whether it has a buffer
    # (a plan reads the buffers of arguments, and the values of constants
    # without one), the layout of its buffer (a view's strides are in the
    # calls that read it), and the default backend (where constants are
    # made). :error for arguments of other backends.
    defp signature(tensors) do
      Enum.reduce_while(tensors, {:ok, [Nx.default_backend()]}, fn
        %Nx.Tensor{data: %Nx.Vulkan.Backend{ref: nil, device: d, value: v}}, {:ok, acc} ->
          {:cont, {:ok, [{d, v, :constant} | acc]}}

        %Nx.Tensor{data: %Nx.Vulkan.Backend{device: d, value: v, strides: s}}, {:ok, acc} ->
          {:cont, {:ok, [{d, v, s} | acc]}}

        _, _ ->
          {:halt, :error}
      end)
    end

    ## Plans

    # A plan is {ops, outputs, device}: ops a list of {name, arg_spec,
    # result_slots}; outputs the evaluation's result with each tensor's
    # data replaced at replay by the ref its spec names. Specs:
    # {:p, i} the i-th argument's ref, {:s, i} slot i, {:c, term} a
    # constant, {:l, specs} a list, {:t, specs} a tuple. Elementwise ops
    # are then fused (Nx.Vulkan.Fusion).
    defp make_plan(calls, tensors, result) do
      refs = Enum.map(tensors, & &1.data.ref)
      # Constants without a buffer (nil) are no argument a call can use:
      # kernels read them from the scalar cache, a plan constant.
      buffers = Enum.reject(refs, &is_nil/1)

      if length(Enum.uniq(buffers)) != length(buffers) do
        # One tensor passed as two arguments: which argument a call used
        # is ambiguous. Not stored; a later call makes the plan.
        :retry
      else
        prov = for {r, i} <- Enum.with_index(refs), r != nil, into: %{}, do: {r, {:p, i}}

        try do
          {ops, prov, _next, infos} = Enum.reduce(calls, {[], prov, 0, %{}}, &plan_call/2)
          {ops, prov} = __fold_constants__(Enum.reverse(ops), prov)
          {result, specs} = output_specs(result, prov)
          {ops, specs} = own_output_constants(ops, specs)
          device = device_of(tensors)

          ops =
            if Application.get_env(:nx_vulkan, :compiler_fusion, true) do
              Nx.Vulkan.Fusion.plan(ops, specs, &info_of(&1, infos, refs), device)
            else
              ops
            end

          ops = ops |> by_depth() |> with_frees(specs)
          {ops, {result, specs}, device, native(ops, specs)}
        catch
          :unplannable -> :none
        end
      end
    end

    defp plan_call({name, _args, _result, _info}, _acc) when name in @abort,
      do: throw(:unplannable)

    defp plan_call({name, _args, _result, _info}, acc) when name in @query, do: acc

    defp plan_call({name, args, result, info}, {ops, prov, next, infos}) do
      specs = Enum.map(args, &arg_spec(&1, prov))

      if name in @mutating and match?([{:c, _} | _], specs), do: throw(:unplannable)

      if name not in @mutating and name not in @fresh and not Enum.any?(specs, &depends?/1) do
        # Depends on no argument: done once, now; its results are constants.
        {ops, mark_constants(result, prov), next, infos}
      else
        {slots, prov, next} = result_slots(result, prov, next)
        infos = if info, do: Map.put(infos, hd(slots), info), else: infos
        {[{name, specs, slots} | ops], prov, next, infos}
      end
    end

    # {type, count} of the tensor a spec names, or nil when unknown.
    defp info_of({:s, i}, infos, _refs), do: Map.get(infos, i)
    defp info_of({:p, i}, _infos, refs), do: Capture.result_info(Enum.at(refs, i))
    defp info_of({:c, ref}, _infos, _refs) when is_reference(ref), do: Capture.result_info(ref)
    defp info_of(_spec, _infos, _refs), do: nil

    defp arg_spec(ref, prov) when is_reference(ref), do: Map.get(prov, ref, {:c, ref})
    defp arg_spec(list, prov) when is_list(list), do: {:l, Enum.map(list, &arg_spec(&1, prov))}

    defp arg_spec(tuple, _prov) when is_tuple(tuple) and tuple_size(tuple) > 0,
      do: if(has_ref?(tuple), do: throw(:unplannable), else: {:c, tuple})

    defp arg_spec(term, _prov), do: {:c, term}

    defp has_ref?(term) when is_reference(term), do: true
    defp has_ref?(term) when is_list(term), do: Enum.any?(term, &has_ref?/1)
    defp has_ref?(term) when is_tuple(term), do: has_ref?(Tuple.to_list(term))
    defp has_ref?(_), do: false

    defp depends?({:p, _}), do: true
    defp depends?({:s, _}), do: true
    defp depends?({:l, specs}), do: Enum.any?(specs, &depends?/1)
    defp depends?({:c, _}), do: false

    defp mark_constants(result, prov) do
      result |> refs_in() |> Enum.reduce(prov, &Map.put(&2, &1, {:c, &1}))
    end

    defp result_slots(result, prov, next) do
      result
      |> refs_in()
      |> Enum.reduce({[], prov, next}, fn ref, {slots, prov, n} ->
        {[n | slots], Map.put(prov, ref, {:s, n}), n + 1}
      end)
      |> then(fn {slots, prov, n} -> {Enum.reverse(slots), prov, n} end)
    end

    # The refs in a NIF result, in a fixed order.
    defp refs_in(ref) when is_reference(ref), do: [ref]
    defp refs_in(list) when is_list(list), do: Enum.flat_map(list, &refs_in/1)
    defp refs_in(tuple) when is_tuple(tuple), do: refs_in(Tuple.to_list(tuple))
    defp refs_in(_), do: []

    # Tensors assembled from constants alone are constants too: an empty
    # tensor whose every write is a copy of a constant (a concatenation of
    # constants, such as threefry's counters after a key split), and then
    # every op that reads only constants and whose result nothing writes
    # into or deallocates. Their results, computed by the evaluation that
    # made the plan, stay with the plan as constants ({:c, ref}), and their
    # ops leave it. An empty qualifies only when nothing deallocates it and
    # nothing reads it before its last copy (the evaluation's buffer then
    # holds what every reader read).
    @doc false
    def __fold_constants__(ops, prov) do
      slot_ref = for {ref, {:s, i}} <- prov, into: %{}, do: {i, ref}
      ops = List.to_tuple(ops)

      assembled =
        for i <- 0..(tuple_size(ops) - 1)//1,
            {:empty, specs, [slot]} <- [elem(ops, i)],
            Enum.all?(specs, &match?({:c, _}, &1)),
            Map.has_key?(slot_ref, slot),
            writers = assembled_writers(ops, i, slot),
            into: %{},
            do: {slot, [i | writers]}

      dropped = assembled |> Map.values() |> List.flatten() |> MapSet.new()
      consts = Map.new(Map.keys(assembled), &{&1, slot_ref[&1]})

      # Slots that an op writes into or deallocates (a backend's temporary
      # freed after use) stay slots: as constants the plan's buffers would
      # be written or freed by its replays.
      mutated =
        for {name, specs, _} <- Tuple.to_list(ops),
            name in @mutating,
            slot <- Enum.flat_map(specs, &slots_of/1),
            into: MapSet.new(),
            do: slot

      {kept, consts} =
        ops
        |> Tuple.to_list()
        |> Enum.with_index()
        |> Enum.reduce({[], consts}, fn {{name, specs, slots}, i}, {kept, consts} ->
          specs = Enum.map(specs, &const_spec(&1, consts))

          cond do
            MapSet.member?(dropped, i) ->
              {kept, consts}

            name not in @mutating and name not in @fresh and slots != [] and
              not Enum.any?(specs, &depends?/1) and
                Enum.all?(slots, &(Map.has_key?(slot_ref, &1) and &1 not in mutated)) ->
              {kept, Enum.reduce(slots, consts, &Map.put(&2, &1, slot_ref[&1]))}

            true ->
              {[{name, specs, slots} | kept], consts}
          end
        end)

      prov = Enum.reduce(consts, prov, fn {_slot, ref}, prov -> Map.put(prov, ref, {:c, ref}) end)
      {Enum.reverse(kept), prov}
    end

    # The indices of the copies that write slot (an empty made by op e)
    # when every op after e that names it is a copy of a constant into it
    # or, after the last such copy, an op that only reads it; else nil.
    defp assembled_writers(ops, e, slot) do
      users =
        for i <- (e + 1)..(tuple_size(ops) - 1)//1,
            {name, specs, _} = elem(ops, i),
            slot in Enum.flat_map(specs, &slots_of/1),
            do: {i, name, specs}

      {writers, readers} =
        Enum.split_with(users, fn {_i, name, specs} ->
          name == :copy_into and hd(specs) == {:s, slot}
        end)

      last = writers |> Enum.map(&elem(&1, 0)) |> Enum.max(fn -> e end)

      if writers != [] and
           Enum.all?(writers, fn {_i, _name, [_dst | rest]} ->
             not Enum.any?(rest, &depends?/1)
           end) and
           Enum.all?(readers, fn {i, name, _} -> i > last and name not in @mutating end),
         do: Enum.map(writers, &elem(&1, 0))
    end

    defp const_spec({:s, i} = spec, consts) do
      case consts do
        %{^i => ref} -> {:c, ref}
        _ -> spec
      end
    end

    defp const_spec({:l, specs}, consts), do: {:l, Enum.map(specs, &const_spec(&1, consts))}
    defp const_spec(spec, _consts), do: spec

    defp output_specs(result, prov) do
      {_, specs} =
        Nx.Defn.Composite.traverse(result, [], fn
          # The plan keeps templates, not this call's buffers.
          %Nx.Tensor{data: %Nx.Vulkan.Backend{ref: ref} = data} = t, acc ->
            {%{t | data: %{data | ref: nil}}, [Map.get(prov, ref, {:c, ref}) | acc]}

          _, _ ->
            throw(:unplannable)
        end)

      {result, Enum.reverse(specs)}
    end

    # Orders the ops by their depth in the dependency graph (stable: ops of
    # one depth keep their order), so that independent ops are queued next
    # to each other: the scheduler records a barrier only where an op reads
    # or overwrites what the ops since the last barrier wrote, and ops
    # between two barriers may run concurrently on the GPU. An op depends
    # on the last op that wrote each slot or argument it reads or writes,
    # and an op writing into one (copy_into, deallocate) also on the ops
    # that read it since. The results do not change: every op computes from the same
    # inputs.
    defp by_depth(ops) do
      # writer: key -> depth of its last writer; readers: key -> deepest
      # reader since.
      {depths, _writer, _readers} =
        Enum.reduce(ops, {[], %{}, %{}}, fn {name, specs, out}, {depths, writer, readers} ->
          reads = Enum.flat_map(specs, &keys_of/1)
          out = Enum.map(out, &{:s, &1})
          writes = written_keys(name, specs) ++ out
          reads = reads -- writes
          before = Enum.map(reads ++ writes, &Map.get(writer, &1, -1))
          before = before ++ Enum.map(writes, &Map.get(readers, &1, -1))
          depth = Enum.max([-1 | before]) + 1
          writer = Enum.reduce(writes, writer, &Map.put(&2, &1, depth))
          readers = Map.drop(readers, writes)

          readers =
            Enum.reduce(reads, readers, &Map.update(&2, &1, depth, fn d -> max(d, depth) end))

          {[depth | depths], writer, readers}
        end)

      ops
      |> Enum.zip(Enum.reverse(depths))
      |> Enum.with_index()
      |> Enum.sort_by(fn {{_op, depth}, i} -> {depth, i} end)
      |> Enum.map(fn {{op, _depth}, _i} -> op end)
    end

    # The slots an op writes into (its destinations) or deallocates.
    defp written_keys(:fused_pair, specs), do: specs |> Enum.drop(5) |> Enum.flat_map(&keys_of/1)
    defp written_keys(name, specs) when name in @mutating, do: keys_of(hd(specs))
    defp written_keys(_name, _specs), do: []

    # The slots and arguments a spec names.
    defp keys_of({:s, _} = key), do: [key]
    defp keys_of({:p, _} = key), do: [key]
    defp keys_of({:l, specs}), do: Enum.flat_map(specs, &keys_of/1)
    defp keys_of({:t, specs}), do: Enum.flat_map(specs, &keys_of/1)
    defp keys_of(_), do: []

    # Adds to each op the slots to deallocate after it: those no later op
    # and no output uses. A replay makes little garbage, so its
    # intermediates would otherwise hold their buffers until the process
    # next collects garbage, and the pool would grow to cover them.
    defp with_frees(ops, out_specs) do
      kept = out_specs |> Enum.flat_map(&slots_of/1) |> MapSet.new()

      {ops, _seen} =
        ops
        |> Enum.reverse()
        |> Enum.map_reduce(kept, fn {name, specs, out}, seen ->
          used = Enum.flat_map(specs, &slots_of/1) ++ out
          free = used |> Enum.uniq() |> Enum.reject(&MapSet.member?(seen, &1))
          {{name, Enum.map(specs, &fold/1), out, free}, MapSet.union(seen, MapSet.new(used))}
        end)

      Enum.reverse(ops)
    end

    # A list or tuple spec of constants is a constant: built once here
    # instead of on every replay (a fused op's immediate inputs, shapes,
    # strides). A view {tensor, offset, strides} of constant offset and
    # strides resolves its tensor only ({:v, spec, offset, strides}).
    defp fold({kind, specs}) when kind in [:l, :t] do
      specs = Enum.map(specs, &fold/1)

      cond do
        Enum.all?(specs, &match?({:c, _}, &1)) ->
          values = Enum.map(specs, &elem(&1, 1))
          {:c, if(kind == :l, do: values, else: List.to_tuple(values))}

        match?({:t, [_, {:c, _}, {:c, _}]}, {kind, specs}) ->
          [spec, {:c, offset}, {:c, strides}] = specs
          {:v, spec, offset, strides}

        true ->
          {kind, specs}
      end
    end

    defp fold(spec), do: spec

    defp slots_of({:s, i}), do: [i]
    defp slots_of({:l, specs}), do: Enum.flat_map(specs, &slots_of/1)
    defp slots_of({:t, specs}), do: Enum.flat_map(specs, &slots_of/1)
    defp slots_of(_), do: []

    # A constant the evaluation returned is the caller's: they may
    # deallocate it. The plan uses a handle of its own on the same buffer
    # instead, and each replay returns a new handle ({:k, ref}).
    defp own_output_constants(ops, specs) do
      owned =
        for {:c, ref} when is_reference(ref) <- specs, into: %{} do
          {type, _count} = Nx.Vulkan.NIF.tensor_info(ref)
          {ref, Nx.Vulkan.NIF.reinterpret(ref, type)}
        end

      swap = fn
        {:c, ref} = spec -> if(k = owned[ref], do: {:c, k}, else: spec)
        spec -> spec
      end

      ops =
        Enum.map(ops, fn {name, specs, slots} ->
          {name, Enum.map(specs, &swap_spec(&1, swap)), slots}
        end)

      specs =
        Enum.map(specs, fn
          {:c, ref} when is_reference(ref) -> {:k, owned[ref]}
          spec -> spec
        end)

      {ops, specs}
    end

    defp swap_spec({:l, specs}, swap), do: {:l, Enum.map(specs, &swap_spec(&1, swap))}
    defp swap_spec(spec, swap), do: swap.(spec)

    defp device_of([%Nx.Tensor{data: %Nx.Vulkan.Backend{device: d}} | _]), do: d

    defp device_of([]) do
      case Nx.default_backend() do
        {Nx.Vulkan.Backend, opts} -> Keyword.get(opts, :device)
        _ -> nil
      end
    end

    # The plan as Nx.Vulkan.NIF.replay/2 runs it, in one NIF call:
    # {{slot_count, ops, output_slots}, out_specs} with each {:s, i} of the
    # outputs replaced by {:o, j}, its place in the returned tuple. nil
    # when turned off (config :nx_vulkan, compiler_native_replay: false) or
    # when an op is not one replay/2 may call or has a list or tuple
    # argument, or more result or freed slots, than it takes (64): such
    # plans are replayed call by call.
    defp native(ops, out_specs) do
      if Application.get_env(:nx_vulkan, :compiler_native_replay, true) do
        try do
          native_ops =
            for {name, specs, out, free} <- ops do
              index = Nx.Vulkan.NIF.replay_index(name, length(specs)) || throw(:no_native)
              if length(out) > 64 or length(free) > 64, do: throw(:no_native)
              args = specs |> prepare(name) |> Enum.map(&native_spec/1) |> List.to_tuple()
              {name, index, args, List.to_tuple(out), List.to_tuple(free)}
            end

          slot_count =
            Enum.reduce(ops, 0, fn {_, _, out, _}, n -> Enum.reduce(out, n, &max(&1 + 1, &2)) end)

          {outputs, {out_specs, _}} =
            Enum.flat_map_reduce(out_specs, {[], 0}, fn
              {:s, i}, {acc, j} -> {[i], {[{:o, j} | acc], j + 1}}
              spec, {acc, j} -> {[], {[spec | acc], j}}
            end)

          plan = {slot_count, List.to_tuple(native_ops), List.to_tuple(outputs)}
          {plan, Enum.reverse(out_specs)}
        catch
          :no_native -> nil
        end
      end
    end

    # A fused op's program, prepared once for the plan's replays
    # (Nx.Vulkan.NIF.fused_program/3).
    defp prepare([{:c, type}, shape, {:c, words}, {kind, inputs} = in_spec], :fused)
         when is_list(words) and kind in [:l, :c] and is_list(inputs) do
      program = Nx.Vulkan.NIF.fused_program(type, length(inputs), words)
      [{:c, type}, shape, {:c, program}, in_spec]
    end

    defp prepare([dst, offset | specs], :fused_into), do: [dst, offset | prepare(specs, :fused)]

    defp prepare(
           [{:c, type}, shape, {:c, words}, {:c, second}, {kind, inputs} = in_spec | dests],
           :fused_pair
         )
         when is_list(words) and kind in [:l, :c] and is_list(inputs) do
      program = Nx.Vulkan.NIF.fused_program(type, length(inputs), words, second)
      [{:c, type}, shape, {:c, program}, {:c, second}, in_spec | dests]
    end

    defp prepare(specs, _name), do: specs

    # Nx.Vulkan.NIF.replay/2 takes the specs of a list or tuple as a tuple
    # of at most 64.
    defp native_spec({kind, specs}) when kind in [:l, :t] do
      if length(specs) > 64, do: throw(:no_native)
      {kind, specs |> Enum.map(&native_spec/1) |> List.to_tuple()}
    end

    defp native_spec({:v, spec, offset, strides}), do: {:v, native_spec(spec), offset, strides}
    defp native_spec(spec), do: spec

    ## Replay

    defp replay({_ops, {result, _}, device, {plan, specs}}, tensors) do
      params = tensors |> Enum.map(& &1.data.ref) |> List.to_tuple()

      outputs = Nx.Vulkan.Backend.__alloc__(device, fn -> Nx.Vulkan.NIF.replay(plan, params) end)
      fill(result, specs, params, outputs)
    end

    defp replay({ops, {result, specs}, device, nil}, tensors) do
      params = tensors |> Enum.map(& &1.data.ref) |> List.to_tuple()

      slots =
        Enum.reduce(ops, %{}, fn {name, specs, out, free}, slots ->
          args = resolve_list(specs, params, slots)
          value = call(device, name, args)
          slots = assign(out, refs_in(value), slots)
          release(free, slots)
        end)

      fill(result, specs, params, slots)
    end

    # The plan's result with each tensor's ref the one its spec names
    # (slots: the slot map of a replay from Elixir, or the tuple of output
    # tensors replay/2 returned).
    defp fill(result, specs, params, slots) do
      {result, []} =
        Nx.Defn.Composite.traverse(result, specs, fn t, [spec | rest] ->
          {%{t | data: %{t.data | ref: resolve(spec, params, slots)}}, rest}
        end)

      result
    end

    defp resolve({:c, term}, _params, _slots), do: term
    defp resolve({:o, j}, _params, outputs), do: elem(outputs, j)
    defp resolve({:s, i}, _params, slots), do: Map.fetch!(slots, i)

    defp resolve({:v, spec, off, strides}, params, slots),
      do: {resolve(spec, params, slots), off, strides}

    defp resolve({:p, i}, params, _slots), do: elem(params, i)
    defp resolve({:l, specs}, params, slots), do: resolve_list(specs, params, slots)

    defp resolve({:t, specs}, params, slots),
      do: specs |> resolve_list(params, slots) |> List.to_tuple()

    defp resolve({:k, ref}, _params, _slots) do
      {type, _count} = Nx.Vulkan.NIF.tensor_info(ref)
      Nx.Vulkan.NIF.reinterpret(ref, type)
    end

    defp resolve_list([spec | specs], params, slots),
      do: [resolve(spec, params, slots) | resolve_list(specs, params, slots)]

    defp resolve_list([], _params, _slots), do: []

    # Deallocating a handle returns its buffer to the pool once the queued
    # work that reads it has finished: one NIF call for an op's frees.
    defp release([], slots), do: slots

    defp release(free, slots) do
      {refs, slots} = Enum.map_reduce(free, slots, &Map.pop!(&2, &1))
      Nx.Vulkan.NIF.deallocate_many(refs)
      slots
    end

    defp assign([], [], slots), do: slots
    defp assign([i | is], [r | rs], slots), do: assign(is, rs, Map.put(slots, i, r))

    # A NIF call, retried like the backend's allocations when the device
    # pool is full.
    defp call(device, name, args) do
      Nx.Vulkan.Backend.__alloc__(device, fn -> apply(Nx.Vulkan.NIF, name, args) end)
    end

    ## Expressions

    # false when expr has hooks or tokens, :control when it has loops or
    # branches, else :plain.
    defp plannable(expr) do
      {_, {_, kind}} = Nx.Defn.Composite.traverse(expr, {%{}, :plain}, &walk/2)

      kind
    end

    defp walk(%Nx.Tensor{data: %Nx.Defn.Expr{id: id, op: op}} = t, {seen, kind}) do
      cond do
        kind == false or Map.has_key?(seen, id) ->
          {t, {seen, kind}}

        op in @unplannable_ops ->
          {t, {seen, false}}

        true ->
          kind = if op in @control_ops, do: :control, else: kind
          {_, acc} = Nx.Defn.Tree.apply_args(t, :all, {Map.put(seen, id, true), kind}, &walk/2)
          {t, acc}
      end
    end

    defp walk(other, acc), do: {other, acc}

    # What the expression depends on: the structure of the arguments and
    # the type, shape and names of each tensor in it.
    defp templates(vars) do
      Enum.map(vars, fn var ->
        {template, :ok} =
          Nx.Defn.Composite.traverse(var, :ok, fn
            %Nx.Tensor{} = t, :ok -> {{t.type, t.shape, t.names, t.vectorized_axes}, :ok}
            other, :ok -> {other, :ok}
          end)

        template
      end)
    end

    defp store(key, value) do
      if cache_size() >= @max_entries, do: clear_cache()
      :persistent_term.put(key, value)
      :persistent_term.put(@count_key, cache_size() + 1)
    end
  end
end
