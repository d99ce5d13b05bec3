defmodule Nx.Vulkan do
  @moduledoc """
  Vulkan devices for Nx.

  `Nx.Vulkan.Backend` is the Nx backend; this module lists devices, reads
  runtime counters, waits for queued work and reports host fallbacks.

      Nx.default_backend(Nx.Vulkan.Backend)
      Nx.default_backend({Nx.Vulkan.Backend, device: 1})

  Device contexts are opened on first use, one per device index, and kept
  for the life of the VM. Their options come from the application
  environment (`config :nx_vulkan, :device_options, %{...}`, see
  `docs/configuration.md`).
  """

  alias Nx.Vulkan.NIF

  @typedoc "A device index as listed by `devices/0`."
  @type device_index :: non_neg_integer

  @doc """
  Lists the Vulkan devices: index, name, type, whether the runtime can use
  it, features and limits.
  """
  @spec devices() :: [map]
  def devices do
    for i <- 0..(NIF.device_count() - 1)//1, do: NIF.device_info(i)
  end

  @doc """
  The index of the device used when none is given: the `:default_device`
  setting, else the runtime's choice (`NX_VULKAN_DEVICE`, else the best
  GPU). It is chosen once per VM, on first use (choosing enumerates every
  device, and every number Nx turns into a tensor asks for it): later
  changes to the setting do not apply.
  """
  @spec default_device_index() :: device_index
  def default_device_index do
    case :persistent_term.get({__MODULE__, :default_device_index}, nil) do
      nil ->
        index =
          case Application.get_env(:nx_vulkan, :default_device) do
            nil -> NIF.default_device_index()
            index when is_integer(index) and index >= 0 -> index
            other -> raise ArgumentError, "invalid :default_device #{inspect(other)}"
          end

        :persistent_term.put({__MODULE__, :default_device_index}, index)
        index

      index ->
        index
    end
  end

  @doc """
  The device context for `index` (default: `default_device_index/0`),
  opened on first use. Raises `ArgumentError` for an index that does not
  exist and `Nx.Vulkan.Error` when the device cannot be opened.
  """
  @spec device(device_index | nil) :: reference
  def device(index \\ nil) do
    index = index || default_device_index()

    case :persistent_term.get({__MODULE__, :device, index}, nil) do
      nil -> open(index)
      ref -> ref
    end
  end

  defp open(index) when is_integer(index) and index >= 0 do
    :global.trans(
      {{__MODULE__, :open, index}, self()},
      fn ->
        case :persistent_term.get({__MODULE__, :device, index}, nil) do
          nil ->
            opts = Map.new(Application.get_env(:nx_vulkan, :device_options, %{}))
            ref = NIF.open_device(index, opts)
            :persistent_term.put({__MODULE__, :device, index}, ref)
            Nx.Vulkan.Telemetry.device_opened(index, ref)
            ref

          ref ->
            ref
        end
      end,
      [node()]
    )
  end

  defp open(index), do: raise(ArgumentError, "invalid device index #{inspect(index)}")

  @doc """
  Replaces the context of device `index` (default: the default device)
  with a newly opened one, its options the application's
  `:device_options` merged with `opts`, and returns it.

  For recovery after the device failed: a lost device or a failed
  submission makes a context raise the same `Nx.Vulkan.Error` for every
  later operation; `reopen/2` gives the index a working context. Tensors
  made on the old context stay on it (they keep raising its error, or
  keep working if it had not failed) and cannot be combined with tensors
  of the new one. The old context closes once its last tensor is
  collected. Also the way to change a device's options at run time.
  """
  @spec reopen(device_index | nil, map | keyword) :: reference
  def reopen(index \\ nil, opts \\ %{}) do
    index = index || default_device_index()

    unless is_integer(index) and index >= 0,
      do: raise(ArgumentError, "invalid device index #{inspect(index)}")

    :global.trans(
      {{__MODULE__, :open, index}, self()},
      fn ->
        opts =
          Application.get_env(:nx_vulkan, :device_options, %{})
          |> Map.new()
          |> Map.merge(Map.new(opts))

        ref = NIF.open_device(index, opts)
        :persistent_term.put({__MODULE__, :device, index}, ref)
        Nx.Vulkan.Scalars.clear(index)
        Nx.Vulkan.Telemetry.device_opened(index, ref)
        ref
      end,
      [node()]
    )
  end

  @doc """
  Counters of a device (default: the default device): pool bytes reserved,
  in use and peak, pool hits/misses, device allocations and frees, ops
  enqueued and completed, submits, barriers, epochs, `gpu_busy_ns` (GPU
  time of the completed batches, from timestamps at their start and end;
  0 where the queue writes none; a batch of at most two ops under 2^16
  elements of work, such as a small op and its download, writes none),
  `batches_untimed` (batches completed without timestamps),
  `bytes_submitted` (bytes the submitted ops write: the size-class bytes of
  the buffers a kernel writes, a copy's or fill's byte count), pipeline
  cache hits/misses and whether the cache file was loaded or rejected (and
  why).

  Four latency histograms, kept in C since the device opened, each
  `%{count:, sum_ns:, max_ns:, buckets:}` with `buckets` the count per
  bucket of `histogram_bucket_limits/0`:

    * `op_latency` - each op, from its enqueue to its batch seen complete;
    * `queue_wait` - each batch, from the enqueue of its first op to its
      submission;
    * `batch_gpu` - each timed batch's GPU time (empty where the queue
      writes no timestamps);
    * `download_wait` - each download, from its start to the caller seeing
      it complete.

  `percentile/2` reads a quantile off one.
  """
  @spec stats(device_index | nil) :: map
  def stats(index \\ nil), do: NIF.device_stats(device(index))

  @typedoc "A latency histogram of `stats/1`."
  @type histogram :: %{
          count: non_neg_integer,
          sum_ns: non_neg_integer,
          max_ns: non_neg_integer,
          buckets: [non_neg_integer]
        }

  @doc """
  The exclusive upper bound in nanoseconds of each bucket of the latency
  histograms in `stats/1`: bucket 0 counts values below 256 ns, bucket `i`
  (1 to 30) values in [2^(i+7), 2^(i+8)) ns, the last one (`:infinity`)
  values of 2^38 ns (about 275 s) and more.

      iex> Nx.Vulkan.histogram_bucket_limits() |> Enum.take(3)
      [256, 512, 1024]
      iex> Nx.Vulkan.histogram_bucket_limits() |> length()
      32
  """
  @spec histogram_bucket_limits() :: [pos_integer | :infinity]
  def histogram_bucket_limits do
    Enum.map(0..30, &(256 * Bitwise.bsl(1, &1))) ++ [:infinity]
  end

  @doc """
  An upper bound on the `q` quantile (0.0 to 1.0) of a histogram of
  `stats/1`: the limit of the bucket where the cumulative count reaches
  `q` of the values, capped by the largest value seen; `nil` when the
  histogram is empty.

      iex> h = %{count: 4, sum_ns: 2300, max_ns: 1200, buckets: [1, 2, 0, 1] ++ List.duplicate(0, 28)}
      iex> Nx.Vulkan.percentile(h, 0.5)
      512
      iex> Nx.Vulkan.percentile(h, 0.99)
      1200
  """
  @spec percentile(histogram, float) :: non_neg_integer | nil
  def percentile(%{count: 0}, _q), do: nil

  def percentile(%{count: count, max_ns: max, buckets: buckets}, q) when q >= 0 and q <= 1 do
    target = max(1, ceil(q * count))

    buckets
    |> Enum.zip(histogram_bucket_limits())
    |> Enum.reduce_while(0, fn {n, limit}, acc ->
      if acc + n >= target, do: {:halt, {:found, limit}}, else: {:cont, acc + n}
    end)
    |> case do
      {:found, :infinity} -> max
      {:found, limit} -> min(limit, max)
      _ -> max
    end
  end

  @doc """
  Waits until every operation queued on the device has completed. Raises
  `Nx.Vulkan.Error` if the device failed.
  """
  @spec synchronize(device_index | nil) :: :ok
  def synchronize(index \\ nil), do: NIF.synchronize(device(index))

  @doc "Frees the device memory the pool holds but does not use."
  @spec trim(device_index | nil) :: :ok
  def trim(index \\ nil), do: NIF.trim(device(index))

  @doc """
  Host fallbacks taken so far, as `%{op => count}`: operations computed on
  the CPU through `Nx.BinaryBackend` because the device has no kernel for
  them. See `Nx.Vulkan.Backend` for the `:host_fallback` setting.
  """
  @spec fallbacks() :: %{atom => non_neg_integer}
  def fallbacks, do: Nx.Vulkan.Fallback.counts()

  @doc "Resets the fallback counters."
  @spec reset_fallbacks() :: :ok
  def reset_fallbacks, do: Nx.Vulkan.Fallback.reset()

  @doc """
  Runs `fun` with the host fallback policy `mode` (`:allow`, `:warn` or
  `:raise`) for the calling process, restoring the previous one after.
  """
  @spec with_host_fallback(:allow | :warn | :raise, (() -> result)) :: result when result: var
  def with_host_fallback(mode, fun) when mode in [:allow, :warn, :raise] do
    previous = Process.put(:nx_vulkan_host_fallback, mode)

    try do
      fun.()
    after
      if previous,
        do: Process.put(:nx_vulkan_host_fallback, previous),
        else: Process.delete(:nx_vulkan_host_fallback)
    end
  end
end
