# Backend and conformance tests need Nx (NX_PATH or Hex); without it only
# the NIF-level tests run and the rest are reported as excluded.
exclude =
  if Code.ensure_loaded?(Nx) do
    []
  else
    IO.puts(
      "Nx is not available (no Hex and NX_PATH unset): running the NIF-level " <>
        "tests only; backend and Nx conformance tests (tag :nx) are skipped."
    )

    [:nx]
  end

# Telemetry events need the :telemetry application (a dependency of Nx).
exclude = if Code.ensure_loaded?(:telemetry), do: exclude, else: [:telemetry | exclude]

ExUnit.start(exclude: exclude)

Code.require_file("support/workload.exs", __DIR__)
if Code.ensure_loaded?(Nx), do: Code.require_file("support/nx_data.exs", __DIR__)
