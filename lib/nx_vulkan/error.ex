defmodule Nx.Vulkan.Error do
  @moduledoc """
  Raised when the Vulkan device fails: a lost device, a failed submission,
  device memory exhausted, a driver error. Errors of the queue are sticky:
  once a device has failed, every later operation on it raises the same
  error (`status` and `message`) until a new context is opened.
  """
  defexception [:status, :message]

  @type t :: %__MODULE__{status: atom, message: String.t()}
end

defmodule Nx.Vulkan.OutOfMemoryError do
  @moduledoc """
  Raised when an operation cannot get device memory even after the
  runtime waited for queued work to return buffers, garbage was collected
  (in the calling process, then in every process) and the pool was
  trimmed (see `Nx.Vulkan.Memory`).

  Nothing is lost: the tensors that existed before the call are intact,
  the device stays usable, and the operation can be tried again once
  memory is freed. Fields: `device` (the device index, or `nil` for a
  device context opened directly), `bytes_in_use` and `bytes_reserved`
  (the pool after the last attempt) and `message` (which includes the
  runtime's account of the failed allocation).
  """
  defexception [:message, :device, :bytes_in_use, :bytes_reserved]

  @type t :: %__MODULE__{
          message: String.t(),
          device: non_neg_integer | nil,
          bytes_in_use: non_neg_integer,
          bytes_reserved: non_neg_integer
        }
end
