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
