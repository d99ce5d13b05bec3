defmodule Nx.Vulkan.Capture do
  @moduledoc false
  # The functions of Nx.Vulkan.NIF, as the backend calls them. Each calls
  # the NIF; while the calling process captures (capture/1), it also logs
  # {name, args, result, info}, newest first, so that Nx.Vulkan.Compiler can
  # replay the device calls of an evaluation without evaluating it again.
  # Each entry also holds the result's `{type, count}` when the result is
  # one tensor (nil otherwise), read while it is certainly alive. Outside a
  # capture the cost is one process-dictionary read per call.

  require Nx.Vulkan.NIF

  @key :nx_vulkan_capture

  for {name, arity} <- Nx.Vulkan.NIF.__info__(:functions), name != :load_nif do
    args = Macro.generate_arguments(arity, __MODULE__)

    def unquote(name)(unquote_splicing(args)) do
      result = Nx.Vulkan.NIF.unquote(name)(unquote_splicing(args))

      # :erlang.get/1 rather than Process.get/1 (two calls more) on every
      # device op: :undefined outside a capture.
      case :erlang.get(unquote(@key)) do
        :undefined ->
          result

        log when is_list(log) ->
          info = if is_reference(result), do: Nx.Vulkan.Capture.result_info(result)
          Process.put(unquote(@key), [{unquote(name), unquote(args), result, info} | log])
          Nx.Vulkan.Capture.count(info)
          result

        :aborted ->
          result
      end
    end
  end

  @limits_key :nx_vulkan_capture_limits

  @doc """
  Runs `fun` logging this process's NIF calls: `{result, {:ok, calls}}`
  with the calls oldest first, or `{result, :aborted}` when `abort/0` ran
  meanwhile. Not reentrant: a nested capture raises.

  `limits` (`{calls, bytes}`, or `:infinity`) bounds the log: once it
  holds more calls, or its tensor results more bytes (which the log keeps
  alive), the capture aborts and drops the log, so that the evaluation
  goes on freeing its intermediates (a loop's iterations are logged one
  after the other).
  """
  def capture(fun, limits \\ :infinity) do
    if Process.get(@key) != nil, do: raise(ArgumentError, "nested device call capture")
    Process.put(@key, [])
    if limits != :infinity, do: Process.put(@limits_key, {limits, 0, 0})

    try do
      result = fun.()

      case Process.get(@key) do
        :aborted -> {result, :aborted}
        log -> {result, {:ok, Enum.reverse(log)}}
      end
    after
      Process.delete(@key)
      Process.delete(@limits_key)
    end
  end

  @doc false
  # Counts one logged call and its result's {type, count} against the
  # capture's limits; aborts the capture past them.
  def count(info) do
    case Process.get(@limits_key) do
      nil ->
        :ok

      {{max_calls, max_bytes} = limits, calls, bytes} ->
        bytes = bytes + result_bytes(info)

        if calls + 1 > max_calls or bytes > max_bytes do
          Process.delete(@limits_key)
          abort()
        else
          Process.put(@limits_key, {limits, calls + 1, bytes})
        end

        :ok
    end
  end

  defp result_bytes({type, count}) when is_integer(count), do: count * type_bytes(type)
  defp result_bytes(_), do: 0

  defp type_bytes(type) when type in [:s8, :u8], do: 1
  defp type_bytes(type) when type in [:s16, :u16, :f16, :bf16], do: 2
  defp type_bytes(type) when type in [:s32, :u32, :f32], do: 4
  defp type_bytes(type) when type in [:s64, :u64, :f64, :c64], do: 8
  defp type_bytes(:c128), do: 16
  defp type_bytes(_), do: 0

  @doc false
  # {type, count} of a tensor result; nil for other references (devices).
  def result_info(ref) do
    Nx.Vulkan.NIF.tensor_info(ref)
  rescue
    ArgumentError -> nil
  end

  @doc "Whether this process is capturing."
  def capturing?, do: Process.get(@key) != nil

  @doc "Marks the capture in progress, if any, as not replayable."
  def abort do
    if Process.get(@key) != nil, do: Process.put(@key, :aborted)
    :ok
  end
end
