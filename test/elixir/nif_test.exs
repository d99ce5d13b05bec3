defmodule Nx.Vulkan.NIFTest do
  # NIF-level tests: they need no Nx.
  use ExUnit.Case, async: false

  alias Nx.Vulkan.NIF
  import Bitwise

  setup_all do
    %{dev: Nx.Vulkan.device()}
  end

  defp f32(list), do: for(x <- list, into: <<>>, do: <<x::float-32-native>>)
  defp s32(list), do: for(x <- list, into: <<>>, do: <<x::signed-32-native>>)
  defp to_f32(bin), do: for(<<x::float-32-native <- bin>>, do: x)
  defp to_s32(bin), do: for(<<x::signed-32-native <- bin>>, do: x)

  test "devices are listed and described" do
    assert NIF.device_count() >= 1
    [info | _] = Nx.Vulkan.devices()
    assert %{name: name, type: type, usable: true, features: f, limits: l} = info

    assert is_binary(name) and
             type in [:cpu, :discrete_gpu, :integrated_gpu, :virtual_gpu, :other]

    assert f.timeline_semaphore and f.buffer_device_address
    assert l.max_push_constants_size >= 128
    assert_raise ArgumentError, ~r/device/, fn -> NIF.device_info(10_000) end
    assert_raise ArgumentError, fn -> NIF.device_info(-1) end
    assert_raise ArgumentError, ~r/no Vulkan device/, fn -> NIF.open_device(10_000, %{}) end
    assert_raise ArgumentError, ~r/option/, fn -> NIF.open_device(-1, %{max_batch_nodes: -3}) end

    for w <- [65, -1, :on, 1.5] do
      assert_raise ArgumentError, ~r/reorder_window/, fn ->
        NIF.open_device(-1, %{reorder_window: w})
      end
    end
  end

  test "fused programs run and reject bad arguments", %{dev: dev} do
    a = NIF.upload(dev, :f32, f32([1.0, -2.0, 3.0, 4.0]))
    b = NIF.upload(dev, :f32, f32([0.5]))
    # (a * b) - a, with b broadcast
    mul = 1 ||| 2 <<< 2 ||| 0 <<< 9 ||| 1 <<< 16
    sub = 1 ||| 1 <<< 2 ||| 2 <<< 9 ||| 0 <<< 16
    out = NIF.fused(:f32, [4], [mul, sub], [{a, 0, nil}, {b, 0, [0]}])
    assert to_f32(NIF.download(out, 0, 4)) == [-0.5, 1.0, -1.5, -2.0]

    # The same with 0.5 a literal (f16 bits 0x3800) instead of an input;
    # an infinity (0x7C00) is no float literal.
    mul_lit = 1 ||| 2 <<< 2 ||| 1 <<< 8 ||| 0 <<< 9 ||| 0x3800 <<< 16
    sub1 = 1 ||| 1 <<< 2 ||| 1 <<< 9 ||| 0 <<< 16
    out = NIF.fused(:f32, [4], [mul_lit, sub1], [{a, 0, nil}])
    assert to_f32(NIF.download(out, 0, 4)) == [-0.5, 1.0, -1.5, -2.0]

    assert_raise ArgumentError, ~r/literal 0x7c00 is not a normal f16/, fn ->
      NIF.fused(:f32, [4], [1 ||| 1 <<< 8 ||| 0x7C00 <<< 16], [{a, 0, nil}])
    end

    assert_raise ArgumentError, ~r/unknown type/, fn ->
      NIF.fused(:f33, [4], [mul], [{a, 0, nil}])
    end

    assert_raise ArgumentError, ~r/1 to 12 views/, fn -> NIF.fused(:f32, [4], [mul], []) end

    assert_raise ArgumentError, ~r/at most 112 words/, fn ->
      NIF.fused(:f32, [4], List.duplicate(mul, 113), [{a, 0, nil}, {b, 0, [0]}])
    end

    assert_raise ArgumentError, ~r/word 0/, fn -> NIF.fused(:f32, [4], [-1], [{a, 0, nil}]) end

    assert_raise ArgumentError,
                 "fused input 0 must be {tensor, offset, strides} or an immediate",
                 fn -> NIF.fused(:f32, [4], [mul], [a]) end

    # An immediate input: one element's bytes, first or second, of every
    # program type; the same as that value in a tensor.
    for {type, value, expected} <- [
          {:f32, f32([0.5]), [-0.5, 1.0, -1.5, -2.0]},
          {:f64, <<0.5::float-64-native>>, [-0.5, 1.0, -1.5, -2.0]},
          {:f16, <<0x3800::16-native>>, [-0.5, 1.0, -1.5, -2.0]}
        ] do
      x = NIF.upload(dev, :f32, f32([1.0, -2.0, 3.0, 4.0]))
      x = if type == :f32, do: x, else: NIF.convert(type, [4], x, 0, nil)
      out = NIF.fused(type, [4], [mul, sub], [{x, 0, nil}, value])
      out = if type == :f32, do: out, else: NIF.convert(:f32, [4], out, 0, nil)
      assert to_f32(NIF.download(out, 0, 4)) == expected, "#{type}"
    end

    # b - a: the immediate as input 0, every integer program type
    for type <- [:s32, :s64, :u32, :u64] do
      bits = if type in [:s32, :u32], do: 32, else: 64
      x = NIF.upload(dev, type, for(v <- [1, 2, 3, 4], into: <<>>, do: <<v::size(bits)-native>>))
      sub_ba = 1 ||| 1 <<< 2 ||| 0 <<< 9 ||| 1 <<< 16
      out = NIF.fused(type, [4], [sub_ba], [<<10::size(bits)-native>>, {x, 0, nil}])

      assert for(<<v::size(bits)-native <- NIF.download(out, 0, 4)>>, do: v) == [9, 8, 7, 6],
             "#{type}"
    end

    assert_raise ArgumentError,
                 ~r/input 1: an immediate must be one f32 element \(4 bytes\), got 8/,
                 fn ->
                   NIF.fused(:f32, [4], [mul], [{a, 0, nil}, <<0.5::float-64-native>>])
                 end

    assert_raise ArgumentError, "fused: at least one input must be a tensor", fn ->
      NIF.fused(:f32, [4], [mul], [f32([1.0]), f32([2.0])])
    end

    # each input is named in its errors
    assert_raise ArgumentError, "fused input 1: offset must be an integer", fn ->
      NIF.fused(:f32, [4], [mul], [{a, 0, nil}, {b, :x, [0]}])
    end

    assert_raise ArgumentError, "fused input 11: expected a Nx.Vulkan tensor", fn ->
      NIF.fused(:f32, [4], [mul], List.duplicate({a, 0, nil}, 11) ++ [{:x, 0, nil}])
    end

    # reads register 2 with two inputs: rejected by the runtime, whose
    # message names the op once
    assert_raise ArgumentError,
                 "fused: instruction 0 reads register 2, only 2 are written before it",
                 fn -> NIF.fused(:f32, [4], [sub], [{a, 0, nil}, {b, 0, [0]}]) end

    assert_raise ArgumentError, ~r/s32/, fn ->
      c = NIF.upload(dev, :s32, s32([1, 2, 3, 4]))
      NIF.fused(:f32, [4], [mul], [{c, 0, nil}, {b, 0, [0]}])
    end

    # the tensors still work
    assert to_f32(NIF.download(a, 0, 4)) == [1.0, -2.0, 3.0, 4.0]
  end

  test "fused programs are checked as their runs check them, with nothing queued",
       %{dev: dev} do
    mul = 1 ||| 2 <<< 2 ||| 0 <<< 9 ||| 1 <<< 16
    sub = 1 ||| 1 <<< 2 ||| 2 <<< 9 ||| 0 <<< 16
    band = 1 ||| 10 <<< 2
    before = NIF.device_stats(dev)

    assert NIF.fused_check(dev, :f32, 2, [mul, sub], 0) == :ok
    # of two results: mul's register as the second
    assert NIF.fused_check(dev, :f32, 2, [mul, sub], 2) == :ok
    assert NIF.fused_check(dev, :s32, 1, [band], 0) == :ok

    assert_raise ArgumentError, ~r/bitwise_and .* is not supported for f32/, fn ->
      NIF.fused_check(dev, :f32, 1, [band], 0)
    end

    assert_raise ArgumentError, ~r/second result is register 3/, fn ->
      NIF.fused_check(dev, :f32, 2, [mul, sub], 3)
    end

    assert_raise ArgumentError,
                 "fused: instruction 0 reads register 2, only 2 are written before it",
                 fn -> NIF.fused_check(dev, :f32, 2, [sub], 0) end

    assert_raise ArgumentError, ~r/not u8/, fn -> NIF.fused_check(dev, :u8, 2, [mul], 0) end
    assert_raise ArgumentError, ~r/1 to 12/, fn -> NIF.fused_check(dev, :f32, 13, [mul], 0) end

    assert_raise ArgumentError, ~r/expected a device/, fn ->
      NIF.fused_check(:x, :f32, 2, [mul], 0)
    end

    assert_raise ArgumentError, ~r/unknown type/, fn ->
      NIF.fused_check(dev, :f33, 2, [mul], 0)
    end

    assert_raise ArgumentError, ~r/at most 112 words/, fn ->
      NIF.fused_check(dev, :f32, 2, List.duplicate(mul, 113), 0)
    end

    assert_raise ArgumentError, ~r/non-negative integer/, fn ->
      NIF.fused_check(dev, :f32, 2, [mul, sub], -1)
    end

    after_checks = NIF.device_stats(dev)
    assert after_checks.ops_enqueued == before.ops_enqueued
    assert after_checks.pipeline_misses == before.pipeline_misses
  end

  test "prepared fused programs give the list's results and reject bad arguments",
       %{dev: dev} do
    a = NIF.upload(dev, :f32, f32([1.0, -2.0, 3.0, 4.0]))
    b = NIF.upload(dev, :f32, f32([0.5]))
    mul = 1 ||| 2 <<< 2 ||| 0 <<< 9 ||| 1 <<< 16
    sub = 1 ||| 1 <<< 2 ||| 2 <<< 9 ||| 0 <<< 16
    program = NIF.fused_program(:f32, 2, [mul, sub])

    # views, the scalar as an immediate, then views again
    for inputs <- [
          [{a, 0, nil}, {b, 0, [0]}],
          [{a, 0, nil}, f32([0.5])],
          [{a, 0, nil}, {b, 0, [0]}]
        ] do
      out = NIF.fused(:f32, [4], program, inputs)

      assert NIF.download(out, 0, 4) ==
               NIF.download(NIF.fused(:f32, [4], [mul, sub], inputs), 0, 4)

      assert to_f32(NIF.download(out, 0, 4)) == [-0.5, 1.0, -1.5, -2.0]
    end

    assert_raise ArgumentError, ~r/unknown type/, fn -> NIF.fused_program(:f33, 2, [mul]) end
    assert_raise ArgumentError, ~r/input count/, fn -> NIF.fused_program(:f32, -1, [mul]) end
    assert_raise ArgumentError, ~r/1 to 12/, fn -> NIF.fused_program(:f32, 13, [mul]) end
    assert_raise ArgumentError, ~r/at most 112 words/, fn -> NIF.fused_program(:f32, 2, 5) end

    assert_raise ArgumentError, ~r/at most 112 words/, fn ->
      NIF.fused_program(:f32, 2, List.duplicate(mul, 113))
    end

    assert_raise ArgumentError, ~r/word 1/, fn -> NIF.fused_program(:f32, 2, [mul, -1]) end

    assert_raise ArgumentError,
                 "fused: instruction 0 reads register 2, only 2 are written before it",
                 fn -> NIF.fused_program(:f32, 2, [sub]) end

    assert_raise ArgumentError, ~r/not u8/, fn -> NIF.fused_program(:u8, 2, [mul]) end

    assert_raise ArgumentError,
                 "fused: the prepared program is of f32 over 2 inputs, the call gives f64 and 2 inputs",
                 fn -> NIF.fused(:f64, [4], program, [{a, 0, nil}, {b, 0, [0]}]) end

    assert_raise ArgumentError, ~r/over 2 inputs, the call gives f32 and 3 inputs/, fn ->
      NIF.fused(:f32, [4], program, [{a, 0, nil}, {b, 0, [0]}, {b, 0, [0]}])
    end

    # an op f32 programs do not run: refused at the run, every time
    band = NIF.fused_program(:f32, 1, [1 ||| 10 <<< 2])

    for _ <- 1..2 do
      assert_raise ArgumentError, ~r/bitwise_and .* is not supported for f32/, fn ->
        NIF.fused(:f32, [4], band, [{a, 0, nil}])
      end
    end

    # a tensor handle is not a program, nor a program a tensor
    assert_raise ArgumentError, ~r/prepared program/, fn ->
      NIF.fused(:f32, [4], a, [{a, 0, nil}])
    end

    assert_raise ArgumentError, ~r/expected a Nx.Vulkan tensor/, fn ->
      NIF.fused(:f32, [4], [mul], [{program, 0, nil}, {b, 0, [0]}])
    end

    assert to_f32(NIF.download(a, 0, 4)) == [1.0, -2.0, 3.0, 4.0]
  end

  test "upload and download round trip every type", %{dev: dev} do
    for {type, size} <- [
          s8: 1,
          s16: 2,
          s32: 4,
          s64: 8,
          u8: 1,
          u16: 2,
          u32: 4,
          u64: 8,
          f16: 2,
          bf16: 2,
          f32: 4,
          f64: 8,
          c64: 8,
          c128: 16
        ] do
      bin = :crypto.strong_rand_bytes(size * 37)
      t = NIF.upload(dev, type, bin)
      assert NIF.tensor_info(t) == {type, 37}
      assert NIF.download(t, 0, 37) == bin
      assert NIF.download(t, 5, 3) == binary_part(bin, 5 * size, 3 * size)
      assert NIF.download(t, 37, 0) == ""
      big = NIF.upload_dirty(dev, type, bin)
      assert NIF.download(NIF.copy(big), 0, 37) == bin
    end
  end

  test "elementwise, convert, reduce, transpose, matmul, fill, iota", %{dev: dev} do
    a = NIF.upload(dev, :f32, f32([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]))
    b = NIF.upload(dev, :f32, f32([10.0, 20.0, 30.0]))
    # [2, 3] + broadcast row
    c = NIF.binary(:add, [2, 3], a, 0, nil, b, 0, [0, 1])
    assert to_f32(NIF.download(c, 0, 6)) == [11.0, 22.0, 33.0, 14.0, 25.0, 36.0]
    n = NIF.unary(:negate, [2, 3], a, 0, nil)
    assert to_f32(NIF.download(n, 0, 6)) == [-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]
    i = NIF.convert(:s32, [2, 3], n, 0, nil)
    assert to_s32(NIF.download(i, 0, 6)) == [-1, -2, -3, -4, -5, -6]
    s = NIF.reduce(:sum, [2, 3], a, 0, nil, [1], :f32)
    assert to_f32(NIF.download(s, 0, 2)) == [6.0, 15.0]
    t = NIF.transpose([2, 3], a, [1, 0])
    assert to_f32(NIF.download(t, 0, 6)) == [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
    # [2,3] x [3,1]
    m = NIF.matmul(1, 2, 1, 3, a, 0, [0, 3, 1], b, 0, [0, 1, 1])
    assert to_f32(NIF.download(m, 0, 2)) == [140.0, 320.0]
    f = NIF.fill(dev, :s32, 5, s32([7]))
    assert to_s32(NIF.download(f, 0, 5)) == [7, 7, 7, 7, 7]
    io = NIF.iota(dev, :s32, [2, 3], 1)
    assert to_s32(NIF.download(io, 0, 6)) == [0, 1, 2, 0, 1, 2]
    # immediate scalars: one element's bytes on either side
    d = NIF.binary(:subtract, [2, 3], a, 0, nil, f32([0.5]), 0, nil)
    assert to_f32(NIF.download(d, 0, 6)) == [0.5, 1.5, 2.5, 3.5, 4.5, 5.5]
    d = NIF.binary(:subtract, [2, 3], f32([10.0]), 0, nil, a, 0, nil)
    assert to_f32(NIF.download(d, 0, 6)) == [9.0, 8.0, 7.0, 6.0, 5.0, 4.0]
    g = NIF.compare(:greater, [2, 3], a, 0, nil, f32([3.0]), 0, nil)
    assert NIF.download(g, 0, 6) == <<0, 0, 0, 1, 1, 1>>
    # ... also against a strided operand (filled into a buffer first)
    d = NIF.binary(:multiply, [3], a, 5, [-2], f32([2.0]), 0, nil)
    assert to_f32(NIF.download(d, 0, 3)) == [12.0, 8.0, 4.0]
    # reversed view: negative strides with an offset
    r = NIF.unary(:copy, [6], a, 5, [-1])
    assert to_f32(NIF.download(r, 0, 6)) == [6.0, 5.0, 4.0, 3.0, 2.0, 1.0]
    assert NIF.supported(dev, :binary, :add, :f32)
    assert NIF.supported(dev, :binary, :add, :u8)
    assert NIF.supported(dev, :binary, :add, :c64)
    refute NIF.supported(dev, :binary, :max, :c64)
    refute NIF.supported(dev, :compare, :less, :c128)
    refute NIF.supported(dev, :unary, :bitwise_not, :f32)
  end

  test "bad arguments raise ArgumentError and change nothing", %{dev: dev} do
    a = NIF.upload(dev, :f32, f32([1.0, 2.0, 3.0]))
    assert_raise ArgumentError, ~r/unknown type/, fn -> NIF.upload(dev, :f33, <<>>) end
    assert_raise ArgumentError, ~r/whole number/, fn -> NIF.upload(dev, :f32, <<1, 2, 3>>) end
    assert_raise ArgumentError, ~r/expected a device/, fn -> NIF.upload(a, :f32, <<>>) end
    assert_raise ArgumentError, ~r/expected a Nx.Vulkan tensor/, fn -> NIF.download(dev, 0, 1) end
    assert_raise ArgumentError, ~r/elements/, fn -> NIF.download(a, 2, 2) end
    assert_raise ArgumentError, fn -> NIF.download(a, -1, 1) end

    assert_raise ArgumentError, ~r/unknown op/, fn ->
      NIF.binary(:nope, [3], a, 0, nil, a, 0, nil)
    end

    assert_raise ArgumentError, ~r/shape/, fn -> NIF.unary(:negate, :foo, a, 0, nil) end

    assert_raise ArgumentError, ~r/shape/, fn ->
      NIF.unary(:negate, Enum.to_list(1..17), a, 0, nil)
    end

    assert_raise ArgumentError, ~r/reaches elements/, fn -> NIF.unary(:negate, [3], a, 1, nil) end
    assert_raise ArgumentError, ~r/reaches elements/, fn -> NIF.unary(:negate, [3], a, 0, [5]) end
    assert_raise ArgumentError, ~r/strides/, fn -> NIF.unary(:negate, [3], a, 0, [1, 1]) end

    assert_raise ArgumentError, ~r/elements/, fn ->
      NIF.unary(:negate, [4_000_000_000, 4_000_000_000], a, 0, nil)
    end

    assert_raise ArgumentError, fn -> NIF.unary(:negate, [Bitwise.bsl(1, 70)], a, 0, nil) end

    assert_raise ArgumentError, ~r/not implemented for f32/, fn ->
      NIF.unary(:bitwise_not, [3], a, 0, nil)
    end

    assert_raise ArgumentError, ~r/c64/, fn ->
      u = NIF.upload(dev, :c64, <<0::size(192)>>)
      NIF.binary(:max, [3], u, 0, nil, u, 0, nil)
    end

    for {x, off, strides} <- [{<<1, 2>>, 0, nil}, {f32([1.0]), 1, nil}, {f32([1.0]), 0, [0]}] do
      assert_raise ArgumentError, ~r/immediate operand must be one f32 element/, fn ->
        NIF.binary(:add, [3], a, 0, nil, x, off, strides)
      end

      assert_raise ArgumentError, ~r/immediate operand must be one f32 element/, fn ->
        NIF.compare(:less, [3], x, off, strides, a, 0, nil)
      end
    end

    assert_raise ArgumentError, ~r/operand b/, fn ->
      NIF.binary(:add, [3], f32([1.0]), 0, nil, f32([1.0]), 0, nil)
    end

    # Each operand is named in full in the message (formatted only then).
    assert_raise ArgumentError, "binary operand b: expected a Nx.Vulkan tensor", fn ->
      NIF.binary(:add, [3], a, 0, nil, :b, 0, nil)
    end

    assert_raise ArgumentError, "compare operand a: offset must be an integer", fn ->
      NIF.compare(:less, [3], a, :x, nil, f32([1.0]), 0, nil)
    end

    assert_raise ArgumentError,
                 "select operand c: strides must be nil or a list of 1 integers",
                 fn ->
                   NIF.select([3], a, 0, nil, a, 0, nil, a, 0, [1, 1])
                 end

    assert_raise ArgumentError, ~r/immediate operands of c128/, fn ->
      u = NIF.upload(dev, :c128, <<0::size(384)>>)
      NIF.binary(:add, [3], u, 0, nil, <<0::size(128)>>, 0, nil)
    end

    assert_raise ArgumentError, ~r/axis/, fn -> NIF.reduce(:sum, [3], a, 0, nil, [1], :f32) end

    # the result type: the operand's, or 64 bits for sums of narrow integers
    assert_raise ArgumentError, "reduce: unknown result type", fn ->
      NIF.reduce(:sum, [3], a, 0, nil, [0], :f33)
    end

    assert_raise ArgumentError, ~r/^sum: reduce sum from f32 into f64: only sums/, fn ->
      NIF.reduce(:sum, [3], a, 0, nil, [0], :f64)
    end

    b8 = NIF.upload(dev, :u8, <<200, 100, 255>>)
    s64 = NIF.reduce(:sum, [3], b8, 0, nil, [0], :u64)
    assert NIF.download(s64, 0, 1) == <<555::unsigned-64-native>>

    assert_raise ArgumentError, ~r/into s64/, fn ->
      NIF.reduce(:sum, [3], b8, 0, nil, [0], :s64)
    end

    assert_raise ArgumentError, ~r/max from u8 into u64/, fn ->
      NIF.reduce(:max, [3], b8, 0, nil, [0], :u64)
    end

    assert_raise ArgumentError, ~r/permutation/, fn -> NIF.transpose([3, 1], a, [0, 0]) end
    assert_raise ArgumentError, ~r/one f32 element/, fn -> NIF.fill(dev, :f32, 3, <<1>>) end

    assert_raise ArgumentError, ~r/matmul/, fn ->
      NIF.matmul(1, 2, 2, 2, a, 0, [0, 2, 1], a, 0, [0, 2, 1])
    end

    assert_raise ArgumentError, fn ->
      NIF.matmul(-1, 2, 2, 2, a, 0, [0, 2, 1], a, 0, [0, 2, 1])
    end

    assert to_f32(NIF.download(a, 0, 3)) == [1.0, 2.0, 3.0]
    assert NIF.device_status(dev) == :ok
  end

  test "deallocate is idempotent and later use raises", %{dev: dev} do
    a = NIF.upload(dev, :s32, s32([1, 2, 3]))
    b = NIF.binary(:add, [3], a, 0, nil, a, 0, nil)
    assert NIF.deallocate(a) == :ok
    assert NIF.deallocate(a) == :already_deallocated
    assert_raise ArgumentError, ~r/deallocated/, fn -> NIF.download(a, 0, 1) end

    assert_raise ArgumentError, ~r/deallocated/, fn ->
      NIF.binary(:add, [3], a, 0, nil, a, 0, nil)
    end

    # b was queued before a was freed: its input stays alive until done
    assert to_s32(NIF.download(b, 0, 3)) == [2, 4, 6]
  end

  test "deallocate_many frees every tensor of a list, or none of a bad one", %{dev: dev} do
    a = NIF.upload(dev, :s32, s32([1, 2, 3]))
    b = NIF.binary(:add, [3], a, 0, nil, a, 0, nil)
    c = NIF.binary(:multiply, [3], b, 0, nil, a, 0, nil)

    for bad <- [[a, :x], [b, dev], :x, [a | b]] do
      assert_raise ArgumentError, ~r/deallocate_many: expected a list of Nx.Vulkan tensors/, fn ->
        NIF.deallocate_many(bad)
      end
    end

    assert to_s32(NIF.download(a, 0, 3)) == [1, 2, 3]
    assert to_s32(NIF.download(b, 0, 3)) == [2, 4, 6]

    # a deallocated handle in the list is skipped; an empty list is fine
    assert NIF.deallocate(b) == :ok
    assert NIF.deallocate_many([a, b]) == :ok
    assert NIF.deallocate_many([]) == :ok
    assert NIF.deallocate(a) == :already_deallocated

    for t <- [a, b],
        do: assert_raise(ArgumentError, ~r/deallocated/, fn -> NIF.download(t, 0, 1) end)

    # c was queued before its inputs were freed
    assert to_s32(NIF.download(c, 0, 3)) == [2, 8, 18]
  end

  # The bytes of tensors a context holds once its queued work is done.
  defp in_use(ctx) do
    NIF.synchronize(ctx)
    NIF.device_stats(ctx).pool_bytes_in_use
  end

  test "replay_index names the NIFs a plan may call" do
    for {name, arity} <- [binary: 8, fused: 4, matmul: 10, deallocate_many: 1, copy_into: 7],
        do: assert(is_integer(NIF.replay_index(name, arity)))

    # waits, reads back, changes the device, dirty, wrong arity, unknown
    for {name, arity} <- [
          download: 3,
          synchronize: 1,
          trim: 1,
          open_device: 2,
          upload_dirty: 3,
          replay: 2,
          binary: 7,
          no_such_nif: 1
        ],
        do: assert(NIF.replay_index(name, arity) == nil)

    assert_raise ArgumentError, ~r/replay_index: expected a NIF name/, fn ->
      NIF.replay_index("binary", 8)
    end

    assert_raise ArgumentError, fn -> NIF.replay_index(:binary, -1) end
  end

  test "replay runs a plan in one call, frees what it no longer needs" do
    ctx = NIF.open_device(-1, %{})
    bin = NIF.replay_index(:binary, 8)
    fused = NIF.replay_index(:fused, 4)
    reduce = NIF.replay_index(:reduce, 7)
    a = NIF.upload(ctx, :f32, f32([1.0, -2.0, 3.5, 4.0, 0.25]))
    b = NIF.upload(ctx, :f32, f32([0.5, 8.0, -1.0, 2.0, 3.0]))
    base = in_use(ctx)
    plus = 1 ||| 0 <<< 2 ||| 0 <<< 9 ||| 1 <<< 16

    # s0 = a + b; s1 = s0 * a[3] (a broadcast view); s4 = sum(s1);
    # s2 = s4 + 1.0 (an immediate); s3 = s0 - b. Outputs s2 and s3; s0, s1
    # and s4 are freed after their last reader.
    ops = {
      {:binary, bin,
       {{:c, :add}, {:c, [5]}, {:p, 0}, {:c, 0}, {:c, nil}, {:p, 1}, {:c, 0}, {:c, nil}}, {0},
       {}},
      {:binary, bin,
       {{:c, :multiply}, {:c, [5]}, {:s, 0}, {:c, 0}, {:c, nil}, {:p, 0}, {:c, 3}, {:c, [0]}},
       {1}, {}},
      {:reduce, reduce,
       {{:c, :sum}, {:c, [5]}, {:s, 1}, {:c, 0}, {:c, nil}, {:c, [0]}, {:c, :f32}}, {4}, {1}},
      {:fused, fused,
       {{:c, :f32}, {:c, []}, {:c, [plus]}, {:l, {{:v, {:s, 4}, 0, nil}, {:c, f32([1.0])}}}}, {2},
       {4}},
      {:binary, bin,
       {{:c, :subtract}, {:c, [5]}, {:s, 0}, {:c, 0}, {:c, nil}, {:p, 1}, {:c, 0}, {:c, nil}},
       {3}, {0}}
    }

    for _ <- 1..3 do
      assert {s2, s3} = NIF.replay({5, ops, {2, 3}}, {a, b})
      # 4 * (1.5 + 6 + 2.5 + 6 + 3.25) + 1, and (a + b) - b == a exactly
      assert to_f32(NIF.download(s2, 0, 1)) == [78.0]
      assert to_f32(NIF.download(s3, 0, 5)) == [1.0, -2.0, 3.5, 4.0, 0.25]
      # the outputs are all the plan keeps
      assert in_use(ctx) > base
      NIF.deallocate_many([s2, s3])
      assert in_use(ctx) == base
    end

    # the inputs are untouched; an empty plan returns nothing
    assert to_f32(NIF.download(a, 0, 5)) == [1.0, -2.0, 3.5, 4.0, 0.25]
    assert NIF.replay({0, {}, {}}, {}) == {}

    # list and tuple specs build lists and tuples: strides [2]; a view
    # {b, 1, [2]} as a fused input
    copy = NIF.replay_index(:unary, 5)
    strided = {{:c, :copy}, {:c, [2]}, {:p, 0}, {:c, 1}, {:l, {{:c, 2}}}}
    view = {:t, {{:p, 0}, {:c, 1}, {:c, [2]}}}

    ops = {
      {:unary, copy, strided, {0}, {}},
      {:fused, fused, {{:c, :f32}, {:c, [2]}, {:c, [plus]}, {:l, {view, {:c, f32([1.0])}}}}, {1},
       {}}
    }

    assert {c, d} = NIF.replay({2, ops, {0, 1}}, {b})
    assert to_f32(NIF.download(c, 0, 2)) == [8.0, 2.0]
    assert to_f32(NIF.download(d, 0, 2)) == [9.0, 3.0]
  end

  test "replay runs fused ops of prepared programs, their results handles only when needed" do
    ctx = NIF.open_device(-1, %{})
    bin = NIF.replay_index(:binary, 8)
    fused = NIF.replay_index(:fused, 4)
    a = NIF.upload(ctx, :f32, f32([1.0, -2.0, 3.5, 4.0]))
    base = in_use(ctx)
    plus = 1 ||| 0 <<< 2 ||| 0 <<< 9 ||| 1 <<< 16
    times = 1 ||| 2 <<< 2 ||| 0 <<< 9 ||| 1 <<< 16
    p_plus = NIF.fused_program(:f32, 2, [plus])
    p_times = NIF.fused_program(:f32, 2, [times])
    one = {:c, f32([1.0])}

    # s0 = a + 1; s1 = s0 * s0 (both read from a fused result); s2 = s1 +
    # s0 (a NIF call reading both); s3 = a * 2 (a constant input list);
    # s4 = s0 + a[1] (a constant tensor's broadcast view). s0 and s1 are
    # freed after s2; s2, s3 and s4 are returned.
    ops = {
      {:fused, fused, {{:c, :f32}, {:c, [4]}, {:c, p_plus}, {:l, {{:v, {:p, 0}, 0, nil}, one}}},
       {0}, {}},
      {:fused, fused,
       {{:c, :f32}, {:c, [4]}, {:c, p_times},
        {:l, {{:v, {:s, 0}, 0, nil}, {:v, {:s, 0}, 0, nil}}}}, {1}, {}},
      {:binary, bin,
       {{:c, :add}, {:c, [4]}, {:s, 1}, {:c, 0}, {:c, nil}, {:s, 0}, {:c, 0}, {:c, nil}}, {2},
       {0, 1}},
      {:fused, fused, {{:c, :f32}, {:c, [4]}, {:c, p_times}, {:c, [{a, 0, nil}, f32([2.0])]}},
       {3}, {}},
      {:fused, fused,
       {{:c, :f32}, {:c, [4]}, {:c, p_plus},
        {:l, {{:v, {:s, 2}, 0, nil}, {:v, {:c, a}, 1, [0]}}}}, {4}, {}}
    }

    for _ <- 1..3 do
      assert {s2, s3, s4} = NIF.replay({5, ops, {2, 3, 4}}, {a})
      # (a + 1)^2 + (a + 1), a * 2, that + a[1]
      assert to_f32(NIF.download(s2, 0, 4)) == [6.0, 0.0, 24.75, 30.0]
      assert to_f32(NIF.download(s3, 0, 4)) == [2.0, -4.0, 7.0, 8.0]
      assert to_f32(NIF.download(s4, 0, 4)) == [4.0, -2.0, 22.75, 28.0]
      NIF.deallocate_many([s2, s3, s4])
      assert in_use(ctx) == base
    end

    # A run that fails raises as fused/4 does, after s0 was made: nothing
    # is kept. Arguments that do not decode take the NIF call, which
    # raises its own message.
    band = NIF.fused_program(:f32, 1, [1 ||| 10 <<< 2])
    first = elem(ops, 0)
    f32_64 = NIF.fused_program(:f64, 2, [plus])

    cases = [
      {{:fused, fused, {{:c, :f32}, {:c, [4]}, {:c, band}, {:l, {{:v, {:s, 0}, 0, nil}}}}, {1},
        {}}, ~r/bitwise_and .* is not supported for f32/},
      {{:fused, fused, {{:c, :f32}, {:c, [4]}, {:c, p_plus}, {:l, {{:v, {:s, 1}, 0, nil}, one}}},
        {2}, {}}, ~r/op 1 reads slot 1, which holds no tensor/},
      {{:fused, fused, {{:c, :f32}, {:c, [4]}, {:c, f32_64}, {:l, {{:v, {:s, 0}, 0, nil}, one}}},
        {1}, {}}, ~r/the prepared program is of f64 over 2 inputs, the call gives f32/},
      {{:fused, fused,
        {{:c, :f32}, {:c, [4]}, {:c, p_plus}, {:l, {{:v, {:s, 0}, 0, [1, 1]}, one}}}, {1}, {}},
       ~r/fused input 0: strides must be nil or a list of 1 integers/},
      {{:fused, fused, {{:c, :f32}, {:c, [4]}, {:c, p_plus}, {:l, {one, one}}}, {1}, {}},
       ~r/at least one input must be a tensor/}
    ]

    for {op, message} <- cases do
      assert_raise ArgumentError, message, fn -> NIF.replay({3, {first, op}, {0}}, {a}) end
      assert in_use(ctx) == base, inspect(op)
    end

    # binary/8 and unary/5 run the same way: s1 = 0.5 - s0 (an immediate
    # first), s2 = abs(s1) read reversed, s3 = s2 * a; s0 and s1 freed.
    bops = {
      elem(ops, 0),
      {:binary, bin,
       {{:c, :subtract}, {:c, [4]}, {:c, f32([0.5])}, {:c, 0}, {:c, nil}, {:s, 0}, {:c, 0},
        {:c, nil}}, {1}, {0}},
      {:unary, NIF.replay_index(:unary, 5), {{:c, :abs}, {:c, [4]}, {:s, 1}, {:c, 3}, {:c, [-1]}},
       {2}, {1}},
      {:binary, bin,
       {{:c, :multiply}, {:c, [4]}, {:s, 2}, {:c, 0}, {:c, nil}, {:p, 0}, {:c, 0}, {:c, nil}},
       {3}, {}}
    }

    assert {s2, s3} = NIF.replay({4, bops, {2, 3}}, {a})
    assert to_f32(NIF.download(s2, 0, 4)) == [4.5, 4.0, 1.5, 1.5]
    assert to_f32(NIF.download(s3, 0, 4)) == [4.5, -8.0, 5.25, 6.0]
    NIF.deallocate_many([s2, s3])
    assert in_use(ctx) == base

    i = NIF.upload(ctx, :s32, s32([1, 2, 3, 4]))
    base_i = in_use(ctx)

    for {op, message} <- [
          {{:binary, bin,
            {{:c, :add}, {:c, [4]}, {:s, 0}, {:c, 2}, {:c, nil}, {:p, 1}, {:c, 0}, {:c, nil}},
            {1}, {}}, ~r/add: .*(range|bounds|elements)/},
          {{:binary, bin,
            {{:c, :plus}, {:c, [4]}, {:s, 0}, {:c, 0}, {:c, nil}, {:p, 0}, {:c, 0}, {:c, nil}},
            {1}, {}}, ~r/binary: unknown op/},
          {{:binary, bin,
            {{:c, :add}, {:c, [4]}, {:s, 0}, {:c, 0}, {:c, nil}, {:c, <<0, 0>>}, {:c, 0},
             {:c, nil}}, {1}, {}}, ~r/an immediate operand must be one f32 element/},
          {{:unary, NIF.replay_index(:unary, 5),
            {{:c, :abs}, {:c, [4]}, {:s, 0}, {:c, 1}, {:c, nil}}, {1}, {}},
           ~r/abs: .*(range|bounds|elements)/}
        ] do
      assert_raise ArgumentError, message, fn -> NIF.replay({3, {first, op}, {0}}, {a, i}) end
      assert in_use(ctx) == base_i, inspect(op)
    end

    NIF.deallocate(i)

    # A long plan of fused ops yields with its results in slots.
    n = 3000

    chain =
      for i <- 0..(n - 1) do
        x = if i == 0, do: {:v, {:p, 0}, 0, nil}, else: {:v, {:s, i - 1}, 0, nil}
        free = if i == 0, do: {}, else: {i - 1}
        {:fused, fused, {{:c, :f32}, {:c, [4]}, {:c, p_plus}, {:l, {x, one}}}, {i}, free}
      end

    assert {out} = NIF.replay({n, List.to_tuple(chain), {n - 1}}, {a})
    assert to_f32(NIF.download(out, 0, 4)) == [3001.0, 2998.0, 3003.5, 3004.0]
    NIF.deallocate(out)
    assert in_use(ctx) == base
  end

  test "fused_into writes a program's result into a block of a destination", %{dev: dev} do
    a = NIF.upload(dev, :f32, f32([1.0, -2.0, 3.0, 4.0]))
    b = NIF.upload(dev, :f32, f32([0.5]))
    # (a * b) - a, with b broadcast
    mul = 1 ||| 2 <<< 2 ||| 0 <<< 9 ||| 1 <<< 16
    sub = 1 ||| 1 <<< 2 ||| 2 <<< 9 ||| 0 <<< 16
    inputs = [{a, 0, nil}, {b, 0, [0]}]
    dst = NIF.upload(dev, :f32, f32(List.duplicate(7.0, 11)))
    assert NIF.fused_into(dst, 2, :f32, [4], [mul, sub], inputs) == :ok
    prepared = NIF.fused_program(:f32, 2, [mul, sub])
    assert NIF.fused_into(dst, 6, :f32, [2, 2], prepared, [{a, 0, nil}, f32([2.0])]) == :ok

    assert to_f32(NIF.download(dst, 0, 11)) ==
             [7.0, 7.0, -0.5, 1.0, -1.5, -2.0, 1.0, -2.0, 3.0, 4.0, 7.0]

    # Refused, the destination unchanged.
    before = NIF.download(dst, 0, 11)
    other = NIF.upload(dev, :f64, <<0.0::float-64-native>>)

    for {args, message} <- [
          {[dst, 8, :f32, [4], [mul, sub], inputs],
           ~r/fused destination: view reaches elements \[8, 11\] of a tensor of 11/},
          {[dst, -1, :f32, [4], [mul, sub], inputs],
           ~r/fused destination: view reaches elements \[-1, 2\] of a tensor of 11/},
          {[other, 0, :f32, [4], [mul, sub], inputs], ~r/destination is f64, the program f32/},
          {[dst, 0, :f32, [4], [mul, sub], [{dst, 0, [1]}, {b, 0, [0]}]],
           ~r/input 0 reads the destination's buffer/},
          {[dst, :x, :f32, [4], [mul, sub], inputs], ~r/destination offset must be an integer/}
        ] do
      assert_raise ArgumentError, message, fn -> apply(NIF, :fused_into, args) end
    end

    assert NIF.download(dst, 0, 11) == before
    dead = NIF.upload(dev, :f32, f32(List.duplicate(0.0, 4)))
    NIF.deallocate(dead)

    assert_raise ArgumentError, ~r/fused_into destination/, fn ->
      NIF.fused_into(dead, 0, :f32, [4], [mul, sub], inputs)
    end

    # In a replay, without its NIF: s0 = empty(8); s0[0..3] = (a * b) - a,
    # s0[4..7] = (a * 2) - a.
    idx = fn name, arity -> NIF.replay_index(name, arity) end
    ctx = NIF.open_device(-1, %{})
    a = NIF.upload(ctx, :f32, f32([1.0, -2.0, 3.0, 4.0]))
    program = NIF.fused_program(:f32, 2, [mul, sub])
    view = fn spec -> {:v, spec, 0, nil} end

    ops = {
      {:empty, idx.(:empty, 3), {{:c, ctx}, {:c, :f32}, {:c, 8}}, {0}, {}},
      {:fused_into, idx.(:fused_into, 6),
       {{:s, 0}, {:c, 0}, {:c, :f32}, {:c, [4]}, {:c, program},
        {:l, {view.({:p, 0}), {:c, f32([0.5])}}}}, {}, {}},
      {:fused_into, idx.(:fused_into, 6),
       {{:s, 0}, {:c, 4}, {:c, :f32}, {:c, [4]}, {:c, program},
        {:l, {view.({:p, 0}), {:c, f32([2.0])}}}}, {}, {}}
    }

    {direct, via_nif} = NIF.replay_counts()
    assert {s0} = NIF.replay({1, ops, {0}}, {a})
    assert NIF.replay_counts() == {direct + 3, via_nif}

    assert to_f32(NIF.download(s0, 0, 8)) ==
             [-0.5, 1.0, -1.5, -2.0, 1.0, -2.0, 3.0, 4.0]

    # A block past the end raises as the NIF does, keeping nothing.
    bad = put_elem(ops, 2, put_elem(elem(ops, 2), 2, put_elem(elem(elem(ops, 2), 2), 1, {:c, 5})))

    assert_raise ArgumentError,
                 ~r/fused destination: view reaches elements \[5, 8\] of a tensor of 8/,
                 fn ->
                   NIF.replay({1, bad, {0}}, {a})
                 end
  end

  test "fused_pair stores a second register of the program, directly and in a replay",
       %{dev: dev} do
    a = NIF.upload(dev, :f32, f32([1.0, -2.0, 3.0, 4.0]))
    # r1 = a * 0.5 (a literal), r2 = r1 - a: results r2 and r1.
    mul = 1 ||| 2 <<< 2 ||| 1 <<< 8 ||| 0 <<< 9 ||| 0x3800 <<< 16
    sub = 1 ||| 1 <<< 2 ||| 1 <<< 9 ||| 0 <<< 16
    inputs = [{a, 0, nil}]
    half = [0.5, -1.0, 1.5, 2.0]
    diff = [-0.5, 1.0, -1.5, -2.0]

    assert {r, s} = NIF.fused_pair(:f32, [4], [mul, sub], 1, inputs, nil, 0, nil, 0)
    assert to_f32(NIF.download(r, 0, 4)) == diff
    assert to_f32(NIF.download(s, 0, 4)) == half
    NIF.deallocate_many([r, s])

    dst = NIF.upload(dev, :f32, f32(List.duplicate(7.0, 11)))
    prepared = NIF.fused_program(:f32, 1, [mul, sub], 1)
    assert {} = NIF.fused_pair(:f32, [2, 2], prepared, 1, inputs, dst, 6, dst, 1)
    # dst is now [7, half.., 7, diff.., 7]; diff over its first four.
    assert {s} = NIF.fused_pair(:f32, [4], prepared, 1, inputs, dst, 0, nil, 0)
    assert to_f32(NIF.download(s, 0, 4)) == half

    assert to_f32(NIF.download(dst, 0, 11)) ==
             diff ++ [2.0, 7.0] ++ diff ++ [7.0]

    # Refused, the destination unchanged and no tensor made.
    before = NIF.download(dst, 0, 11)
    other = NIF.upload(dev, :f64, <<0.0::float-64-native>>)
    # (Handles this process dropped are freed by its collection first.)
    :erlang.garbage_collect()
    held = in_use(dev)

    for {args, message} <- [
          {[:f32, [4], [mul, sub], 2, inputs, nil, 0, nil, 0],
           ~r/second result is register 2, expected one of an instruction before the last \(1 to 1\)/},
          {[:f32, [4], [mul, sub], 0, inputs, nil, 0, nil, 0], ~r/must be a positive integer/},
          {[:f32, [4], prepared, 2, inputs, nil, 0, nil, 0],
           ~r/prepared program's second result is register 1, the call gives 2/},
          {[:f32, [4], [mul, sub], 1, inputs, dst, 0, dst, 3], ~r/two results' blocks overlap/},
          {[:f32, [4], [mul, sub], 1, inputs, dst, 8, nil, 0],
           ~r/fused destination: view reaches elements \[8, 11\] of a tensor of 11/},
          {[:f32, [4], [mul, sub], 1, inputs, nil, 0, dst, 9],
           ~r/fused second destination: view reaches elements \[9, 12\] of a tensor of 11/},
          {[:f32, [4], [mul, sub], 1, inputs, nil, 0, other, 0],
           ~r/destination is f64, the program f32/},
          {[:f32, [4], [mul, sub], 1, [{dst, 0, [1]}], nil, 0, dst, 4],
           ~r/input 0 reads the second destination's buffer/},
          {[:f32, [4], [mul, sub], 1, inputs, dst, :x, nil, 0],
           ~r/destination 0's offset must be an integer/},
          {[:f32, [4], [mul, sub], 1, inputs, nil, 0, nil, 1 <<< 64],
           ~r/destination 1's offset must be an integer/}
        ] do
      assert_raise ArgumentError, message, fn -> apply(NIF, :fused_pair, args) end
      assert in_use(dev) == held, inspect(message)
    end

    assert NIF.download(dst, 0, 11) == before

    assert_raise ArgumentError,
                 ~r/prepared program.s second result is register 1, the call gives 0/,
                 fn ->
                   NIF.fused(:f32, [4], prepared, inputs)
                 end

    # In a replay, without its NIF: s0 = empty(8); s0[4..7] = (a * 0.5) - a
    # and s1 = a * 0.5; then s0[0..3] = a * 0.5 and s2 = (a * 0.5) - a.
    idx = fn name, arity -> NIF.replay_index(name, arity) end
    ctx = NIF.open_device(-1, %{})
    a = NIF.upload(ctx, :f32, f32([1.0, -2.0, 3.0, 4.0]))
    program = NIF.fused_program(:f32, 1, [mul, sub], 1)
    pair = idx.(:fused_pair, 9)
    specs = [{:c, :f32}, {:c, [4]}, {:c, program}, {:c, 1}, {:l, {{:v, {:p, 0}, 0, nil}}}]

    ops = {
      {:empty, idx.(:empty, 3), {{:c, ctx}, {:c, :f32}, {:c, 8}}, {0}, {}},
      {:fused_pair, pair, List.to_tuple(specs ++ [{:s, 0}, {:c, 4}, {:c, nil}, {:c, 0}]), {1},
       {}},
      {:fused_pair, pair, List.to_tuple(specs ++ [{:c, nil}, {:c, 0}, {:s, 0}, {:c, 0}]), {2}, {}}
    }

    {direct, via_nif} = NIF.replay_counts()
    assert {s0, s1, s2} = NIF.replay({3, ops, {0, 1, 2}}, {a})
    assert NIF.replay_counts() == {direct + 3, via_nif}
    assert to_f32(NIF.download(s0, 0, 8)) == half ++ diff
    assert to_f32(NIF.download(s1, 0, 4)) == half
    assert to_f32(NIF.download(s2, 0, 4)) == diff

    # A block past the end raises as the NIF does, keeping nothing.
    NIF.deallocate_many([s0, s1, s2])
    base = in_use(ctx)

    bad =
      put_elem(
        ops,
        2,
        put_elem(elem(ops, 2), 2, List.to_tuple(specs ++ [{:c, nil}, {:c, 0}, {:s, 0}, {:c, 5}]))
      )

    assert_raise ArgumentError,
                 ~r/fused second destination: view reaches elements \[5, 8\] of a tensor of 8/,
                 fn -> NIF.replay({3, bad, {0}}, {a}) end

    assert in_use(ctx) == base
    NIF.deallocate(a)
  end

  test "replay runs compare, select, reduce, copy_into, empty and reinterpret without their NIF" do
    ctx = NIF.open_device(-1, %{})
    idx = fn name, arity -> NIF.replay_index(name, arity) end

    [bin, cmp, sel, red, copy, empty, cast] = [
      idx.(:binary, 8),
      idx.(:compare, 8),
      idx.(:select, 10),
      idx.(:reduce, 7),
      idx.(:copy_into, 7),
      idx.(:empty, 3),
      idx.(:reinterpret, 2)
    ]

    a = NIF.upload(ctx, :f32, f32([1.0, -2.0, 3.5, 4.0, 0.25, 9.0]))
    base = in_use(ctx)
    dense = [{:c, 0}, {:c, nil}]
    view = fn src, off, strides -> [src, {:c, off}, {:c, strides}] end

    # s0 = empty(6); s1 = a * 2; s0[0..2] = a[1], a[3], a[5]; s0[3..5] =
    # s1[0..2]: s0 = [-2, 4, 9, 2, -4, 7]. s2 = s0 < 3 (an immediate
    # second), s3 = 0 > s0 (an immediate first), s4 = s0 <= a; s5 =
    # select(s2, s0, reversed a); s6 = sum(s5); s7 = the row maxima of s0
    # as 2 x 3; s8 = s6's bits as s32.
    ops = {
      {:empty, empty, {{:c, ctx}, {:c, :f32}, {:c, 6}}, {0}, {}},
      {:binary, bin,
       List.to_tuple(
         [{:c, :multiply}, {:c, [6]}, {:p, 0}] ++
           dense ++
           [{:c, f32([2.0])}] ++ dense
       ), {1}, {}},
      {:copy_into, copy,
       List.to_tuple([{:s, 0}, {:c, 0}, {:c, [1]}, {:c, [3]}] ++ view.({:p, 0}, 1, [2])), {}, {}},
      {:copy_into, copy,
       List.to_tuple([{:s, 0}, {:c, 3}, {:c, [1]}, {:c, [3]}] ++ view.({:s, 1}, 0, [1])), {},
       {1}},
      {:compare, cmp,
       List.to_tuple([{:c, :less}, {:c, [6]}, {:s, 0}] ++ dense ++ [{:c, f32([3.0])}] ++ dense),
       {2}, {}},
      {:compare, cmp,
       List.to_tuple(
         [{:c, :greater}, {:c, [6]}, {:c, f32([0.0])}] ++
           dense ++
           [{:s, 0}] ++
           dense
       ), {3}, {}},
      {:compare, cmp,
       List.to_tuple([{:c, :less_equal}, {:c, [6]}, {:s, 0}] ++ dense ++ [{:p, 0}] ++ dense), {4},
       {}},
      {:select, sel,
       List.to_tuple(
         [{:c, [6]}, {:s, 2}] ++ dense ++ [{:s, 0}] ++ dense ++ view.({:p, 0}, 5, [-1])
       ), {5}, {2}},
      {:reduce, red,
       List.to_tuple([{:c, :sum}, {:c, [6]}, {:s, 5}] ++ dense ++ [{:c, [0]}, {:c, :f32}]), {6},
       {}},
      {:reduce, red,
       List.to_tuple([{:c, :max}, {:c, [2, 3]}, {:s, 0}] ++ dense ++ [{:c, [1]}, {:c, :f32}]),
       {7}, {0}},
      {:reinterpret, cast, {{:s, 6}, {:c, :s32}}, {8}, {}}
    }

    for _ <- 1..3 do
      {direct, via_nif} = NIF.replay_counts()
      assert {s3, s4, s5, s6, s7, s8} = NIF.replay({9, ops, {3, 4, 5, 6, 7, 8}}, {a})
      # every op skipped its NIF (other tests' replays run in turn, not at once)
      assert NIF.replay_counts() == {direct + 11, via_nif}
      assert NIF.download(s3, 0, 6) == <<1, 0, 0, 0, 1, 0>>
      assert NIF.download(s4, 0, 6) == <<1, 0, 0, 1, 1, 1>>
      assert to_f32(NIF.download(s5, 0, 6)) == [-2.0, 0.25, 4.0, 2.0, -4.0, 1.0]
      assert to_f32(NIF.download(s6, 0, 1)) == [1.25]
      assert to_f32(NIF.download(s7, 0, 2)) == [9.0, 7.0]
      assert to_s32(NIF.download(s8, 0, 1)) == [0x3FA00000]
      NIF.deallocate_many([s3, s4, s5, s6, s7, s8])
      assert in_use(ctx) == base
    end

    # Each raises as its NIF does, after s0 was made, keeping nothing: a
    # run's own error (:direct), or arguments that do not decode this way
    # and take the NIF call (:nif).
    first = elem(ops, 0)

    cases = [
      {{:copy_into, copy,
        List.to_tuple([{:s, 0}, {:c, 4}, {:c, [1]}, {:c, [3]}] ++ view.({:p, 0}, 0, [1])), {},
        {}}, ~r/copy_into destination: view reaches elements \[4, 6\] of a tensor of 6/, :direct},
      {{:copy_into, copy,
        List.to_tuple([{:s, 0}, {:c, 0}, {:c, [1]}, {:c, [3]}] ++ view.({:p, 0}, 0, [1])), {1},
        {}}, ~r/returned 0 tensors, the plan expects 1/, :nif},
      {{:copy_into, copy,
        List.to_tuple([{:s, 0}, {:c, 0}, {:c, [1, 1]}, {:c, [3]}] ++ view.({:p, 0}, 0, [1])), {},
        {}}, ~r/copy_into: destination offset and 1 strides expected/, :nif},
      {{:compare, cmp,
        List.to_tuple([{:c, :less}, {:c, [6]}, {:s, 0}] ++ dense ++ [{:c, <<0>>}] ++ dense), {1},
        {}}, ~r/an immediate operand must be one f32 element/, :nif},
      {{:compare, cmp,
        List.to_tuple([{:c, :lesser}, {:c, [6]}, {:s, 0}] ++ dense ++ [{:p, 0}] ++ dense), {1},
        {}}, ~r/compare: unknown op/, :nif},
      {{:select, sel,
        List.to_tuple([{:c, [6]}, {:s, 0}] ++ dense ++ [{:s, 0}] ++ dense ++ [{:p, 0}] ++ dense),
        {1}, {}}, ~r/select: operand a is f32, expected u8/, :direct},
      {{:select, sel,
        List.to_tuple([{:c, [6]}, {:s, 0}] ++ dense ++ [{:s, 0}] ++ dense ++ [{:p, 1}] ++ dense),
        {1}, {}}, ~r/op 1 reads parameter 1 of 1/, :nif},
      {{:reduce, red,
        List.to_tuple([{:c, :sum}, {:c, [6]}, {:s, 0}] ++ dense ++ [{:c, [1]}, {:c, :f32}]), {1},
        {}}, ~r/reduce: axis 1 out of rank 1/, :nif},
      {{:reduce, red,
        List.to_tuple([{:c, :sum}, {:c, [7]}, {:s, 0}] ++ dense ++ [{:c, [0]}, {:c, :f32}]), {1},
        {}}, ~r/sum: .*(range|bounds|elements)/, :direct},
      {{:reinterpret, cast, {{:s, 0}, {:c, :f64}}, {1}, {}},
       ~r/bitcast: cannot reinterpret f32 as f64: element sizes differ/, :direct},
      {{:reinterpret, cast, {{:s, 0}, {:c, :f31}}, {1}, {}}, ~r/reinterpret: unknown type/, :nif},
      {{:empty, empty, {{:c, a}, {:c, :f32}, {:c, 6}}, {1}, {}}, ~r/empty: expected a device/,
       :nif}
    ]

    for item <- cases do
      {op, message, path} = item
      {direct, via_nif} = NIF.replay_counts()
      assert_raise ArgumentError, message, fn -> NIF.replay({3, {first, op}, {0}}, {a}) end
      assert in_use(ctx) == base, inspect(op)

      assert NIF.replay_counts() ==
               if(path == :direct, do: {direct + 2, via_nif}, else: {direct + 1, via_nif + 1}),
             inspect(op)
    end

    assert to_f32(NIF.download(a, 0, 6)) == [1.0, -2.0, 3.5, 4.0, 0.25, 9.0]
  end

  test "a long replay yields its scheduler and keeps its slots" do
    ctx = NIF.open_device(-1, %{})
    bin = NIF.replay_index(:binary, 8)
    one = NIF.upload(ctx, :s32, s32([1, 1, 1]))
    base = in_use(ctx)
    n = 6000
    # s0 = one + one; s(i) = s(i-1) + one, freeing s(i-1)
    ops =
      for i <- 0..(n - 1) do
        x = if i == 0, do: {:p, 0}, else: {:s, i - 1}
        free = if i == 0, do: {}, else: {i - 1}

        {:binary, bin,
         {{:c, :add}, {:c, [3]}, x, {:c, 0}, {:c, nil}, {:p, 0}, {:c, 0}, {:c, nil}}, {i}, free}
      end

    plan = {n, List.to_tuple(ops), {n - 1}}
    {:reductions, reductions} = Process.info(self(), :reductions)
    {us, {out}} = :timer.tc(fn -> NIF.replay(plan, {one}) end)
    {:reductions, reductions2} = Process.info(self(), :reductions)
    assert to_s32(NIF.download(out, 0, 3)) == [n + 1, n + 1, n + 1]
    NIF.deallocate(out)
    assert in_use(ctx) == base
    # past a millisecond it yielded: each continuation is a new NIF call,
    # which the scheduler counts
    if us > 3_000, do: assert(reductions2 - reductions > 4_000)
  end

  test "replay refuses malformed plans and deallocates what it made" do
    ctx = NIF.open_device(-1, %{})
    bin = NIF.replay_index(:binary, 8)
    a = NIF.upload(ctx, :f32, f32([1.0, 2.0, 3.0]))
    base = in_use(ctx)
    args = {{:c, :add}, {:c, [3]}, {:p, 0}, {:c, 0}, {:c, nil}, {:p, 0}, {:c, 0}, {:c, nil}}
    good = {:binary, bin, args, {0}, {}}
    read = fn spec -> {:binary, bin, put_elem(args, 5, spec), {1}, {}} end

    cases = [
      {:plan, ~r/expected a plan \{slot_count, ops, output_slots\}/},
      {{2, [good], {0}}, ~r/expected a plan/},
      {{2, {good}, {2}}, ~r/expected a plan/},
      {{-1, {}, {}}, ~r/expected a plan/},
      {{2, {good, :op}, {0}},
       ~r/op 1 is not \{name, nif_index, arg_specs, out_slots, free_slots\}/},
      {{2, {good, {:binary, 10_000, args, {1}, {}}}, {0}}, ~r/op 1 is not/},
      {{2, {good, {:binary, bin, args, {2}, {}}}, {0}}, ~r/op 1 is not/},
      {{2, {good, {:binary, bin, args, {1}, {-1}}}, {0}}, ~r/op 1 is not/},
      {{2, {good, {:device_count, 0, {}, {1}, {}}}, {0}},
       ~r/op 1 calls device_count\/0, which a plan may not/},
      # another NIF's name at binary's index: a plan of another build
      {{2, {good, {:unary, bin, args, {1}, {}}}, {0}},
       ~r/op 1 names another NIF than binary, index \d+ of this library/},
      {{2, {good, {bin, args, {1}, {}}}, {0}}, ~r/op 1 is not/},
      {{2, {good, {:binary, bin, args, {1}, Tuple.duplicate(0, 65)}}, {0}},
       ~r/at most 64 of each slot list/},
      {{2, {good, {:binary, bin, Tuple.delete_at(args, 7), {1}, {}}}, {0}},
       ~r/op 1 calls binary\/8 with 7 arguments/},
      {{2, {good, read.({:s, 1})}, {0}}, ~r/op 1 reads slot 1, which holds no tensor/},
      {{2, {good, read.({:p, 1})}, {0}}, ~r/op 1 reads parameter 1 of 1/},
      {{2, {good, read.({:q, 1})}, {0}}, ~r/op 1 has a malformed argument spec/},
      {{2, {good, read.({:s, 2})}, {0}}, ~r/op 1 has a malformed argument spec/},
      {{2, {good, read.({:l, [{:p, 0}]})}, {0}}, ~r/op 1 has a malformed argument spec/},
      {{2, {good, read.(:p)}, {0}}, ~r/op 1 has a malformed argument spec/},
      {{2, {good, {:binary, bin, args, {0}, {}}}, {0}},
       ~r/op 1 writes slot 0, which holds a tensor/},
      {{3, {good, {:binary, bin, args, {1, 1}, {}}}, {0}},
       ~r/op 1 writes slot 1, which it names twice/},
      {{3, {good, {:binary, bin, args, {1, 2}, {}}}, {0}},
       ~r/op 1 \(binary\) returned 1 tensors, the plan expects 2/},
      {{3, {good, {:binary, bin, args, {}, {}}}, {0}},
       ~r/returned 1 tensors, the plan expects 0/},
      {{2, {good}, {1}}, ~r/output 0 is slot 1, which holds no tensor/},
      {{2, {good, {:binary, bin, args, {1}, {0}}}, {0}},
       ~r/output 0 is slot 0, which holds no tensor/},
      # an op's own error, raised as the NIF raises it
      {{2, {good, read.({:c, :x})}, {0}}, ~r/^binary operand b: expected a Nx.Vulkan tensor$/}
    ]

    for {plan, message} <- cases do
      assert_raise ArgumentError, message, fn -> NIF.replay(plan, {a}) end
      assert in_use(ctx) == base, inspect(plan)
    end

    assert_raise ArgumentError, ~r/parameters must be a tuple/, fn ->
      NIF.replay({1, {good}, {0}}, [a])
    end

    # a deep spec is refused, not followed
    deep = Enum.reduce(1..20, {:p, 0}, fn _, s -> {:v, s, 0, nil} end)

    assert_raise ArgumentError, ~r/malformed argument spec/, fn ->
      NIF.replay({2, {good, read.(deep)}, {0}}, {a})
    end

    assert in_use(ctx) == base
    assert to_f32(NIF.download(a, 0, 3)) == [1.0, 2.0, 3.0]
  end

  doctest Nx.Vulkan, only: [histogram_bucket_limits: 0, percentile: 2]

  test "latency histograms count every op, batch and download", %{dev: dev} do
    assert NIF.synchronize(dev) == :ok
    before = NIF.device_stats(dev)
    n = 1000
    x = NIF.upload(dev, :f32, f32(List.duplicate(1.0, n)))
    y = Enum.reduce(1..50, x, fn _, acc -> NIF.binary(:add, [n], acc, 0, nil, x, 0, nil) end)
    assert to_f32(NIF.download(y, 0, n)) == List.duplicate(51.0, n)
    assert to_f32(NIF.download(y, n - 1, 1)) == [51.0]
    assert NIF.synchronize(dev) == :ok
    done = NIF.device_stats(dev)
    ops = done.ops_completed - before.ops_completed
    assert ops >= 51

    for key <- [:op_latency, :queue_wait, :batch_gpu, :download_wait] do
      h = done[key]
      assert length(h.buckets) == 32
      assert Enum.sum(h.buckets) == h.count
      assert h.max_ns <= h.sum_ns
    end

    assert done.op_latency.count - before.op_latency.count == ops
    assert done.queue_wait.count - before.queue_wait.count == done.submits - before.submits
    assert done.download_wait.count - before.download_wait.count == 2
    assert done.bytes_submitted - before.bytes_submitted >= 50 * 4 * n
    p50 = Nx.Vulkan.percentile(done.op_latency, 0.5)
    assert is_integer(p50) and p50 > 0 and p50 <= done.op_latency.max_ns
  end

  test "the reordering window: independent chains share barriers, results unchanged" do
    # Six chains of three dependent adds, queued chain after chain.
    run = fn opts ->
      dev = NIF.open_device(-1, Map.put(opts, :disable_disk_cache, true))
      xs = for c <- 1..6, do: NIF.upload(dev, :f32, f32(for i <- 1..33, do: c * 100.0 + i))
      :ok = NIF.synchronize(dev)
      s0 = NIF.device_stats(dev)

      outs =
        for x <- xs do
          Enum.reduce(1..3, x, fn _, acc -> NIF.binary(:add, [33], acc, 0, nil, x, 0, nil) end)
        end

      # Counted up to the synchronize: downloads that copy (where small
      # buffers are not host-visible) add barriers of their own.
      :ok = NIF.synchronize(dev)
      s1 = NIF.device_stats(dev)
      got = for o <- outs, do: to_f32(NIF.download(o, 0, 33))
      {got, s1.barriers - s0.barriers, s1.ops_reordered - s0.ops_reordered}
    end

    {on, barriers_on, reordered} = run.(%{kick_nodes: 1000, idle_flush_us: 10_000_000})

    {off, barriers_off, 0} =
      run.(%{kick_nodes: 1000, idle_flush_us: 10_000_000, reorder_window: :off})

    expected = for c <- 1..6, do: for(i <- 1..33, do: 4 * (c * 100.0 + i))
    assert on == expected
    assert off == expected
    # One barrier per level (3; 4 where the uploads were copies, written
    # since the last barrier) against one per op after each chain's first.
    assert barriers_on <= 4, "#{barriers_on} barriers"
    assert barriers_off >= 12, "#{barriers_off} barriers"
    assert reordered >= 5
  end

  test "enqueue returns before the GPU finishes; only download waits", %{dev: dev} do
    # A chain of 40 dependent 256^3 products: tens of milliseconds of device
    # work on any driver, against microseconds to enqueue it. Work left
    # queued by earlier tests is drained first so that the counters below
    # count this chain only.
    n = 256
    x = NIF.upload(dev, :f32, f32(for i <- 1..(n * n), do: rem(i, 5) * 0.01))
    assert NIF.synchronize(dev) == :ok
    before = NIF.device_stats(dev)

    last =
      Enum.reduce(1..40, x, fn _, acc ->
        NIF.matmul(1, n, n, n, acc, 0, [0, n, 1], x, 0, [0, n, 1])
      end)

    queued = NIF.device_stats(dev)
    enqueued = queued.ops_enqueued - before.ops_enqueued
    assert enqueued >= 40
    # Some of the chain is still pending when the last enqueue returns.
    assert queued.ops_completed - before.ops_completed < enqueued
    <<_::binary-size(4)>> = NIF.download(last, 0, 1)
    assert NIF.synchronize(dev) == :ok
    done = NIF.device_stats(dev)
    assert done.ops_completed - before.ops_completed >= 40
  end

  # x doubled `steps` times on n elements: every element 2^steps.
  defp doubled(dev, n, steps) do
    x = NIF.upload_dirty(dev, :f32, f32(List.duplicate(1.0, n)))
    Enum.reduce(1..steps, x, fn _, acc -> NIF.binary(:add, [n], acc, 0, nil, acc, 0, nil) end)
  end

  test "downloads: fast, continued on a dirty scheduler, large; a killed waiter leaks nothing",
       %{dev: dev} do
    n = 1 <<< 18
    assert NIF.synchronize(dev) == :ok
    base = NIF.device_stats(dev).pool_bytes_in_use

    # Small, after a long queue: the spin runs out and the wait continues.
    x = doubled(dev, n, 30)
    assert to_f32(NIF.download(x, n - 3, 3)) == List.duplicate(1_073_741_824.0, 3)
    # Small and ready: the spin sees it complete.
    assert to_f32(NIF.download(x, 7, 1)) == [1_073_741_824.0]
    # Large (1 MiB): the dirty path.
    assert NIF.download(x, 0, n) == f32(List.duplicate(1_073_741_824.0, n))

    # A process killed while its download is queued behind long work.
    parent = self()

    pid =
      spawn(fn ->
        y = doubled(dev, n, 60)
        send(parent, :queued)
        NIF.download(y, 0, 1)
        send(parent, :downloaded)
      end)

    ref = Process.monitor(pid)
    assert_receive :queued, 10_000
    Process.exit(pid, :kill)
    assert_receive {:DOWN, ^ref, :process, ^pid, :killed}, 10_000
    refute_received :downloaded
    x = nil
    _ = x
    :erlang.garbage_collect()
    # A dead process's resources are freed shortly after its exit.
    assert Enum.any?(1..500, fn _ ->
             :ok = NIF.synchronize(dev)
             NIF.device_stats(dev).pool_bytes_in_use <= base or (Process.sleep(10) && false)
           end),
           "#{NIF.device_stats(dev).pool_bytes_in_use} bytes in use, #{base} before"

    assert to_f32(NIF.download(doubled(dev, 4, 3), 0, 4)) == [8.0, 8.0, 8.0, 8.0]
  end

  test "64 processes run their own chains on one device exactly", %{dev: dev} do
    one = NIF.upload(dev, :s32, s32(List.duplicate(1, 16)))

    results =
      1..64
      |> Task.async_stream(
        fn p ->
          x0 = NIF.upload(dev, :s32, s32(for i <- 1..16, do: p * 1000 + i))
          steps = 100 + p

          x =
            Enum.reduce(1..steps, x0, fn _, acc ->
              NIF.binary(:add, [16], acc, 0, nil, one, 0, nil)
            end)

          to_s32(NIF.download(x, 0, 16)) == for(i <- 1..16, do: p * 1000 + i + steps)
        end,
        max_concurrency: 64,
        timeout: 120_000
      )
      |> Enum.map(fn {:ok, ok} -> ok end)

    assert Enum.all?(results)
  end

  test "stats report pool, queue and pipeline counters", %{dev: dev} do
    s = NIF.device_stats(dev)

    for k <- [
          :pool_bytes_reserved,
          :pool_bytes_in_use,
          :pool_bytes_peak,
          :pool_hits,
          :pool_misses,
          :pool_allocations,
          :pool_frees,
          :ops_enqueued,
          :ops_completed,
          :submits,
          :barriers,
          :ops_reordered,
          :scheduler_wakeups,
          :deferred_ops,
          :deferred_fused,
          :pipeline_hits,
          :pipeline_misses,
          :pipelines
        ] do
      assert is_integer(Map.fetch!(s, k)), "#{k}"
    end

    assert is_boolean(s.cache_file_loaded)
    assert Nx.Vulkan.stats() |> is_map()
    assert Nx.Vulkan.synchronize() == :ok
    assert Nx.Vulkan.trim() == :ok
  end

  test "a failed device raises Nx.Vulkan.Error everywhere, a new context works" do
    dev = NIF.open_device(-1, %{disable_disk_cache: true})
    a = NIF.upload(dev, :f32, f32([1.0, 2.0]))
    :ok = NIF.synchronize(dev)
    :ok = NIF.inject_fault(dev, :device_lost)
    b = NIF.unary(:negate, [2], a, 0, nil)

    err = assert_raise Nx.Vulkan.Error, fn -> NIF.download(b, 0, 2) end
    assert err.status == :device_lost
    assert err.message =~ "injected"
    assert {:device_lost, msg} = NIF.device_status(dev)
    assert msg =~ "injected"
    assert_raise Nx.Vulkan.Error, ~r/injected/, fn -> NIF.unary(:negate, [2], a, 0, nil) end
    assert_raise Nx.Vulkan.Error, fn -> NIF.synchronize(dev) end

    fresh = NIF.open_device(-1, %{disable_disk_cache: true})
    c = NIF.upload(fresh, :f32, f32([1.0, 2.0]))
    assert to_f32(NIF.download(NIF.unary(:negate, [2], c, 0, nil), 0, 2)) == [-1.0, -2.0]
  end

  test "fallback counters and policy" do
    Nx.Vulkan.reset_fallbacks()
    assert Nx.Vulkan.fallbacks() == %{}
    :ok = Nx.Vulkan.Fallback.record!(:sort, "test")
    assert Nx.Vulkan.fallbacks() == %{sort: 1}

    assert_raise ArgumentError, ~r/sort.*host fallbacks are disabled/, fn ->
      Nx.Vulkan.with_host_fallback(:raise, fn -> Nx.Vulkan.Fallback.record!(:sort, "test") end)
    end

    assert Nx.Vulkan.Fallback.mode() == :allow
    assert Nx.Vulkan.fallbacks() == %{sort: 1}
    Nx.Vulkan.reset_fallbacks()
  end
end
