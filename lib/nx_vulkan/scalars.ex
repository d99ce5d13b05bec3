defmodule Nx.Vulkan.Scalars do
  @moduledoc """
  A per-VM cache of single-element device buffers, one per device, type
  and value.

  Nx turns every number in an expression (`Nx.add(t, 1)`, `0.01 * grad`,
  the constants of a `defn`) into a scalar tensor through
  `Nx.Backend.constant/3`. The backend keeps such a constant as its value
  alone, without a buffer. Binary ops and comparisons take the value
  itself (an immediate operand); any other kernel that reads it needs a
  buffer in its own type. Filling a fresh buffer each time would cost a
  device op and an allocation per number per call; instead the backend
  asks this cache, which fills a buffer the first time a `{device, type,
  value}` is seen.
  Kernels read it through the cache's own handle (`fetch_shared/4`); where
  the value becomes (part of) a result, the backend takes a new tensor
  handle on it (`fetch/4`: `Nx.Vulkan.NIF.reinterpret/2`, no device work).

  The cached buffers are never written: no kernel writes into one of its
  inputs. A handle given out can be deallocated (`Nx.backend_deallocate/1`)
  without affecting the cache or other handles. The cache holds at most
  `#{4096}` entries; when full it is emptied (the buffers return to the pool
  once the last handle on them is collected), so a program that makes an
  endless stream of distinct numbers keeps a bounded cache.

  Thread-safety: any process may call `fetch/4`; two processes missing on
  the same key at once both fill, and the first insert wins.
  """

  @table __MODULE__
  @max_entries 4096

  @doc false
  @spec init() :: :ok
  def init do
    :ets.new(@table, [:named_table, :public, :set, read_concurrency: true])
    :ok
  end

  @doc """
  `{handle, value}`: a new handle on the cached buffer of one `nif_type`
  element whose bytes are `bytes` on device `index`, and the value stored
  with it. On a miss `make.()` fills the buffer and returns `{ref, value}`,
  which is cached. Without the cache table (the application not started)
  every call runs `make.()`.
  """
  @spec fetch(non_neg_integer, atom, binary, (() -> {reference, term})) :: {reference, term}
  def fetch(index, nif_type, bytes, make) do
    case cached(index, nif_type, bytes, make) do
      {:cached, ref, value} -> {Nx.Vulkan.NIF.reinterpret(ref, nif_type), value}
      {:uncached, ref, value} -> {ref, value}
    end
  end

  @doc """
  The cached buffer's own handle (no new handle), filling it on a miss
  like `fetch/4`. Only for inputs a kernel reads and that are never handed
  out as (part of) a result: deallocating it would empty the cached buffer
  for everyone.
  """
  @spec fetch_shared(non_neg_integer, atom, binary, (() -> {reference, term})) :: reference
  def fetch_shared(index, nif_type, bytes, make) do
    {_, ref, _value} = cached(index, nif_type, bytes, make)
    ref
  end

  # {:cached, ref, value} of the cache entry (filled by make.() on a miss),
  # or {:uncached, ref, value} from make.() when there is no cache table.
  defp cached(index, nif_type, bytes, make) do
    key = {index, nif_type, bytes}

    case lookup(key) do
      {:ok, ref, value} ->
        {:cached, ref, value}

      :miss ->
        {ref, value} = make.()
        insert(key, ref, value)
        {:cached, ref, value}

      :no_table ->
        {ref, value} = make.()
        {:uncached, ref, value}
    end
  end

  @doc "Empties the cache (all devices, or one device index)."
  @spec clear(non_neg_integer | :all) :: :ok
  def clear(index \\ :all) do
    if :ets.whereis(@table) != :undefined do
      case index do
        :all -> :ets.delete_all_objects(@table)
        index -> :ets.match_delete(@table, {{index, :_, :_}, :_, :_})
      end
    end

    :ok
  end

  @doc "The number of cached buffers."
  @spec size() :: non_neg_integer
  def size do
    case :ets.whereis(@table) do
      :undefined -> 0
      _ -> :ets.info(@table, :size)
    end
  end

  defp lookup(key) do
    case :ets.lookup(@table, key) do
      [{_, ref, value}] -> {:ok, ref, value}
      [] -> :miss
    end
  rescue
    ArgumentError -> :no_table
  end

  defp insert(key, ref, value) do
    if :ets.info(@table, :size) >= @max_entries, do: :ets.delete_all_objects(@table)
    :ets.insert_new(@table, {key, ref, value})
    :ok
  end
end
