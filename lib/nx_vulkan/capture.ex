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
          result

        :aborted ->
          result
      end
    end
  end

  @doc """
  Runs `fun` logging this process's NIF calls: `{result, {:ok, calls}}`
  with the calls oldest first, or `{result, :aborted}` when `abort/0` ran
  meanwhile. Not reentrant: a nested capture raises.
  """
  def capture(fun) do
    if Process.get(@key) != nil, do: raise(ArgumentError, "nested device call capture")
    Process.put(@key, [])

    try do
      result = fun.()

      case Process.get(@key) do
        :aborted -> {result, :aborted}
        log -> {result, {:ok, Enum.reverse(log)}}
      end
    after
      Process.delete(@key)
    end
  end

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
