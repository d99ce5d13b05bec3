# The models and data of the training-step benchmarks (bench/nx_bench.exs,
# bench/step_profile.exs, bench/step_gpu.exs): an MLP (784-512-512-10) and
# a small CNN, each a defn loss and an SGD step, on deterministic host data
# of batch 128, their steps compiled ahead of time, and the GPU work that
# brings a GPU that idled back to its clocks before steps are timed; and a
# backend that does nothing (NxBench.NullBackend), which measures what Nx
# costs by itself (bench/host_split.exs, nx_bench.exs's front-end row).

defmodule NxBench.Models do
  @moduledoc false
  import Nx.Defn

  # mean over the batch of -sum(y * log_softmax(logits), axis 1)
  defn softmax_cross_entropy(logits, y) do
    shifted = logits - Nx.reduce_max(logits, axes: [1], keep_axes: true)
    log_probs = shifted - Nx.log(Nx.sum(Nx.exp(shifted), axes: [1], keep_axes: true))
    Nx.mean(-Nx.sum(y * log_probs, axes: [1]))
  end

  defn mlp_loss({w1, b1, w2, b2, w3, b3}, x, y) do
    h1 = Nx.max(Nx.dot(x, w1) + b1, 0.0)
    h2 = Nx.max(Nx.dot(h1, w2) + b2, 0.0)
    logits = Nx.dot(h2, w3) + b3
    softmax_cross_entropy(logits, y)
  end

  defn mlp_step(params, x, y) do
    {loss, grads} = value_and_grad(params, &mlp_loss(&1, x, y))
    {w1, b1, w2, b2, w3, b3} = params
    {g1, gb1, g2, gb2, g3, gb3} = grads

    {{w1 - 0.01 * g1, b1 - 0.01 * gb1, w2 - 0.01 * g2, b2 - 0.01 * gb2, w3 - 0.01 * g3,
      b3 - 0.01 * gb3}, loss}
  end

  defn cnn_loss({k, kb, w, b}, x, y) do
    conv = Nx.conv(x, k, strides: [1, 1], padding: :valid)
    act = Nx.max(conv + Nx.reshape(kb, {1, 16, 1, 1}), 0.0)
    pooled = Nx.window_max(act, {1, 1, 2, 2}, strides: [1, 1, 2, 2])
    flat = Nx.reshape(pooled, {Nx.axis_size(pooled, 0), 16 * 13 * 13})
    logits = Nx.dot(flat, w) + b
    softmax_cross_entropy(logits, y)
  end

  defn cnn_step(params, x, y) do
    {loss, {gk, gkb, gw, gb}} = value_and_grad(params, &cnn_loss(&1, x, y))
    {k, kb, w, b} = params
    {{k - 0.01 * gk, kb - 0.01 * gkb, w - 0.01 * gw, b - 0.01 * gb}, loss}
  end
end

defmodule NxBench.Data do
  @moduledoc false

  # Deterministic host data, uploaded to the default (Vulkan) backend.
  def normal(rand, shape, scale) do
    n = Tuple.product(shape)

    {bin, rand} =
      Enum.reduce(1..n, {[], rand}, fn _, {acc, r} ->
        {v, r} = :rand.normal_s(r)
        {[<<v * scale::float-32-native>> | acc], r}
      end)

    {Nx.from_binary(IO.iodata_to_binary(bin), :f32) |> Nx.reshape(shape), rand}
  end

  def uniform(rand, shape) do
    n = Tuple.product(shape)

    {bin, rand} =
      Enum.reduce(1..n, {[], rand}, fn _, {acc, r} ->
        {v, r} = :rand.uniform_s(r)
        {[<<v::float-32-native>> | acc], r}
      end)

    {Nx.from_binary(IO.iodata_to_binary(bin), :f32) |> Nx.reshape(shape), rand}
  end

  def one_hot(rand, batch, classes) do
    {labels, rand} =
      Enum.map_reduce(1..batch, rand, fn _, r ->
        {v, r} = :rand.uniform_s(classes, r)
        {v - 1, r}
      end)

    bin =
      for l <- labels,
          c <- 0..(classes - 1),
          into: <<>>,
          do: <<if(l == c, do: 1.0, else: 0.0)::float-32-native>>

    {Nx.from_binary(bin, :f32) |> Nx.reshape({batch, classes}), rand}
  end

  def zeros(n), do: Nx.broadcast(Nx.tensor(0.0, type: :f32), {n})

  def mlp_data do
    r = :rand.seed_s(:exsss, {1, 2, 3})
    {w1, r} = normal(r, {784, 512}, 0.05)
    {w2, r} = normal(r, {512, 512}, 0.05)
    {w3, r} = normal(r, {512, 10}, 0.05)
    {x, r} = uniform(r, {128, 784})
    {y, _} = one_hot(r, 128, 10)
    {{w1, zeros(512), w2, zeros(512), w3, zeros(10)}, x, y}
  end

  def cnn_data do
    r = :rand.seed_s(:exsss, {4, 5, 6})
    {k, r} = normal(r, {16, 1, 3, 3}, 0.1)
    {w, r} = normal(r, {2704, 10}, 0.02)
    {x, r} = uniform(r, {128, 1, 28, 28})
    {y, _} = one_hot(r, 128, 10)
    {{k, zeros(16), w, zeros(10)}, x, y}
  end
end

defmodule NxBench.Steps do
  @moduledoc false

  # {step, params, x, y}: model "mlp" or "cnn"'s SGD step compiled ahead
  # of time with Nx.Defn.Evaluator, and its starting parameters and data
  # (on the default backend).
  def evaluator(model), do: step(model, compiler: Nx.Defn.Evaluator)

  # The same compiled with the Nx.Defn.compile/3 options opts.
  def step(model, opts) do
    {step_fun, {params, x, y}} =
      case model do
        "mlp" -> {&NxBench.Models.mlp_step/3, NxBench.Data.mlp_data()}
        "cnn" -> {&NxBench.Models.cnn_step/3, NxBench.Data.cnn_data()}
      end

    {Nx.Defn.compile(step_fun, [params, x, y], opts), params, x, y}
  end

  # A [:nx_vulkan, :submit] telemetry handler: stores each batch's {ops,
  # GPU ns} in the ordered ETS table, keyed in arrival order.
  def record_submit(_event, m, _meta, table),
    do: :ets.insert(table, {System.unique_integer([:monotonic]), m.ops, m.gpu_time_ns})

  # A [:nx_vulkan, :submit] telemetry handler: stores each batch's
  # {submission, GPU start, GPU end, ops} (runtime clock, ns) in the
  # ordered ETS table, keyed by the submission time.
  def record_timeline(_event, m, _meta, table),
    do: :ets.insert(table, {m.submit_time_ns, m.gpu_start_time_ns, m.gpu_end_time_ns, m.ops})

  # Keeps the GPU busy for `ms` milliseconds with 1024 x 1024 products: a
  # GPU that idled lowers its clocks, and a training loop's short batches
  # alone do not raise them again. CPU devices skip it.
  def busy_gpu(index, ms) do
    if ms > 0 and Nx.Vulkan.NIF.device_info(index).type != :cpu do
      big =
        Nx.iota({1024, 1024}, type: :f32, backend: {Nx.Vulkan.Backend, device: index})
        |> Nx.divide(1024 * 1024)

      t_end = System.monotonic_time(:millisecond) + ms

      # Each product's buffer goes back to the pool at once, so the next
      # one reuses it and the pool ends as it was.
      Stream.repeatedly(fn ->
        Enum.each(1..8, fn _ -> Nx.dot(big, big) |> Nx.backend_deallocate() end)
      end)
      |> Enum.find(fn :ok ->
        :ok = Nx.Vulkan.synchronize(index)
        System.monotonic_time(:millisecond) >= t_end
      end)

      Nx.backend_deallocate(big)
    end

    :ok
  end

  # n steps from params, each loss read back (as a training loop that
  # logs it would): the last parameters.
  def run(step, n, params, x, y) do
    Enum.reduce(1..n, params, fn _, p ->
      {p, loss} = step.(p, x, y)
      Nx.to_number(loss)
      p
    end)
  end
end

defmodule NxBench.NullBackend do
  @moduledoc false
  # Every callback returns its output (the first argument) on this backend,
  # doing nothing else: what the Evaluator costs by itself. null/1 moves a
  # tensor (or a tuple of them) to it.
  @behaviour Nx.Backend
  defstruct []

  @own [:init, :optional, :constant, :from_binary, :to_binary, :backend_transfer] ++
         [:backend_copy, :backend_deallocate, :inspect, :to_batched, :eye, :iota]

  for {name, arity} <- Nx.Backend.behaviour_info(:callbacks), name not in @own do
    args = Macro.generate_arguments(arity, __MODULE__)

    def unquote(name)(unquote_splicing(args)) do
      _ = {unquote_splicing(args)}
      null(unquote(hd(args)))
    end
  end

  def null(%Nx.Tensor{} = t), do: %{t | data: %__MODULE__{}}

  def null(tuple) when is_tuple(tuple),
    do: tuple |> Tuple.to_list() |> Enum.map(&null/1) |> List.to_tuple()

  def null(other), do: other

  def init(opts), do: opts
  def optional(_name, args, fun), do: apply(fun, args)
  def constant(out, _number, _opts), do: null(out)
  def eye(out, _opts), do: null(out)
  def iota(out, _axis, _opts), do: null(out)
  def from_binary(out, _binary, _opts), do: null(out)
  def to_binary(t, _limit), do: :binary.copy(<<0>>, Nx.byte_size(t))
  def backend_transfer(t, _backend, _opts), do: null(t)
  def backend_copy(t, _backend, _opts), do: null(t)
  def backend_deallocate(_t), do: :ok
  def inspect(_t, _opts), do: Inspect.Algebra.string("null")
  def to_batched(out, _t, _opts), do: [null(out)]
end
