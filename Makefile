# nx_vulkan runtime: static library, embedded SPIR-V, C tests and benchmarks.
#
#   make              build build/libnxv.a (compiles every shader in shaders/)
#   make test-c       build and run the C tests (lavapipe when there is no GPU)
#   make test-c-asan  the C tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make test-c-tsan  the ring/scheduler/concurrency tests under ThreadSanitizer
#   make test-elixir  the ExUnit suites (mix test)
#   make test-nif-fuzz  random NIF calls (FUZZ_CALLS, default 100000; FUZZ_SEED)
#                     against the NIF built with AddressSanitizer +
#                     UndefinedBehaviorSanitizer (gcc)
#   make test         all of the above
#   make nif          build the Erlang NIF into priv/ (mix compile does it)
#   make nif-asan     the NIF with ASan + UBSan, build/asan/libnx_vulkan_nif.so
#   make demo         build and run the demo on the default device
#   make bench        build the C benchmarks (build/bench/nxv_bench, vk_floor,
#                     vk_ceiling, cpu_pace, ring_push, ...)
#   make vk-floor     build build/bench/vk_floor (raw Vulkan round trips)
#   make deps         install the Debian packages the build needs, if missing
#
# Variables: SAN=asan|tsan selects a sanitizer build (into build/SAN/),
# CC, OPT (default -O2).

CC      ?= cc
OPT     ?= -O2
SAN     ?=
GLSLANG ?= glslangValidator

ifeq ($(SAN),)
  B := build
  SANFLAGS :=
else ifeq ($(SAN),asan)
  B := build/asan
  SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
else ifeq ($(SAN),tsan)
  B := build/tsan
  SANFLAGS := -fsanitize=thread -Wno-tsan
else
  $(error SAN must be empty, asan or tsan)
endif

GEN      := build/gen
WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CPPFLAGS += -D_GNU_SOURCE -Iinclude -I. -I$(GEN)
CFLAGS   += -std=c11 $(OPT) -g -fPIC $(WARN) $(SANFLAGS)
LDLIBS   += -lvulkan -lpthread -lm

RT_SRC   := $(wildcard sched/*.c pool/*.c kernels/*.c)
RT_OBJ   := $(patsubst %.c,$(B)/obj/%.o,$(RT_SRC)) $(B)/obj/gen/spirv.o
TEST_SRC := $(wildcard test/*.c)
TEST_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(TEST_SRC))
SHADERS  := $(wildcard shaders/*.comp shaders/*.glsl) shaders/variants.txt

.PHONY: all lib nif nif-asan test test-nif-fuzz test-c test-c-threads test-c-asan test-c-tsan test-elixir bench vk-floor demo deps clean bench-all

all: lib
lib: $(B)/libnxv.a

# A build tool run on the host (never sanitized): rewrites modules that use
# NV cooperative matrices into KHR ones (tools/spv_coopmat_khr.c).
SPV_REWRITER := build/tools/spv_coopmat_khr
$(SPV_REWRITER): tools/spv_coopmat_khr.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 $(WARN) $< -o $@

EMBED_SPIRV = GLSLANG=$(GLSLANG) SPV_COOPMAT_KHR=$(SPV_REWRITER) \
	sh tools/embed_spirv.sh shaders/variants.txt $(GEN)

# embed_spirv.sh writes spirv.c every time but spirv.h only when the list
# of modules changes, so that a shader edit rebuilds spirv.o alone. The
# header therefore keeps an older time than the shaders: its rule depends
# on spirv.c alone and regenerates only a missing header, else every build
# would compile every shader again.
$(GEN)/spirv.c: $(SHADERS) tools/embed_spirv.sh $(SPV_REWRITER)
	@mkdir -p $(GEN)
	$(EMBED_SPIRV)

$(GEN)/spirv.h: $(GEN)/spirv.c
	@test -f $@ || $(EMBED_SPIRV)

$(B)/obj/gen/spirv.o: $(GEN)/spirv.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -std=c11 $(OPT) -fPIC -c $< -o $@

$(B)/obj/%.o: %.c $(GEN)/spirv.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(B)/libnxv.a: $(RT_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/test/nxv_tests: $(TEST_OBJ) $(B)/libnxv.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TEST_OBJ) $(B)/libnxv.a $(LDFLAGS) $(LDLIBS) -o $@

BENCH_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(wildcard bench/*.c))

$(B)/bench/nxv_bench: $(BENCH_OBJ) $(B)/libnxv.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ $(LDFLAGS) $(LDLIBS) -o $@

bench: $(B)/bench/nxv_bench $(B)/bench/vk_floor $(B)/bench/vk_ceiling $(B)/bench/vk_coopmat2 \
	$(B)/bench/vk_f32split $(B)/bench/cpu_pace $(B)/bench/ring_push

# Raw Vulkan round-trip floors and arithmetic ceilings, without the runtime
# (bench/floor/).
$(GEN)/add_one.h: bench/floor/add_one.comp
	@mkdir -p $(GEN)
	$(GLSLANG) -V --target-env vulkan1.3 --vn add_one_spv $< -o $@ >/dev/null

$(GEN)/peak_ffma.h: bench/floor/peak_ffma.comp
	@mkdir -p $(GEN)
	$(GLSLANG) -V --target-env vulkan1.3 --vn peak_ffma_spv $< -o $@ >/dev/null

$(GEN)/peak_dfma.h: bench/floor/peak_ffma.comp
	@mkdir -p $(GEN)
	$(GLSLANG) -V --target-env vulkan1.3 -DF64=1 --vn peak_dfma_spv $< -o $@ >/dev/null

$(GEN)/peak_hmma_reg.h: bench/floor/peak_hmma.comp
	@mkdir -p $(GEN)
	$(GLSLANG) -V --target-env vulkan1.3 -DFROM_SHARED=0 --vn peak_hmma_reg_spv $< -o $@ >/dev/null

$(GEN)/peak_hmma_shared.h: bench/floor/peak_hmma.comp
	@mkdir -p $(GEN)
	$(GLSLANG) -V --target-env vulkan1.3 -DFROM_SHARED=1 --vn peak_hmma_shared_spv $< -o $@ >/dev/null

# The same two through VK_KHR_cooperative_matrix: rewritten as the runtime's
# f16 module is.
$(GEN)/peak_hmma_%_khr.h: bench/floor/peak_hmma.comp $(SPV_REWRITER)
	@mkdir -p $(GEN)
	$(GLSLANG) -V --target-env vulkan1.3 -DFROM_SHARED=$(if $(filter shared,$*),1,0) \
		-o $(GEN)/peak_hmma_$*.spv $< >/dev/null
	$(SPV_REWRITER) khr $(GEN)/peak_hmma_$*.spv $@ peak_hmma_$*_khr_spv

# Workgroup-scope tensor-core products (VK_NV_cooperative_matrix2) for
# vk_coopmat2: wg_gemm.comp per mode, tile (MxNxK) and workgroup size,
# rewritten into KHR cooperative matrices ("tensor": mode 0's loads made
# tensor-addressing loads by the rewriter).
WG_GEMM := mem_128x128x32_256 mem_128x256x64_256 tensor_128x128x32_128 \
	tensor_128x256x64_256 shared_128x128x32_128 shared_128x128x64_256 \
	dbuf_128x128x32_128 dbuf_128x128x16_128 products_128x128x32_256 products_128x128x64_128
wg_part = $(word $(2),$(subst _, ,$(1)))
wg_dim = $(word $(2),$(subst x, ,$(call wg_part,$(1),2)))
wg_mode_mem := 0
wg_mode_tensor := 0
wg_mode_shared := 1
wg_mode_products := 2
wg_mode_dbuf := 3
wg_defs = -DWG_MODE=$(wg_mode_$(call wg_part,$(1),1)) \
	-DWG_TM=$(call wg_dim,$(1),1)u -DWG_TN=$(call wg_dim,$(1),2)u -DWG_TK=$(call wg_dim,$(1),3)u \
	-DWG_INV=$(call wg_part,$(1),3)
define wg_gemm_rule
$(GEN)/wg_gemm_$(1).h: bench/floor/wg_gemm.comp $(SPV_REWRITER)
	@mkdir -p $(GEN)
	$(GLSLANG) -V --target-env vulkan1.3 $(call wg_defs,$(1)) -o $(GEN)/wg_gemm_$(1).spv $$< >/dev/null
	$(SPV_REWRITER) khr$(if $(filter tensor,$(call wg_part,$(1),1)),-tensor) $(GEN)/wg_gemm_$(1).spv $$@ wg_gemm_$(1)_spv
endef
$(foreach v,$(WG_GEMM),$(eval $(call wg_gemm_rule,$(v))))

$(B)/bench/vk_coopmat2: bench/floor/vk_coopmat2.c bench/floor/vk_raw.c bench/floor/vk_raw.h \
		sched/vk_khr.h $(foreach v,$(WG_GEMM),$(GEN)/wg_gemm_$(v).h)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) bench/floor/vk_coopmat2.c bench/floor/vk_raw.c $(LDFLAGS) -lvulkan -lm -o $@

# f32 products on bf16 tensor cores (three bf16 terms per element) for
# vk_f32split.
$(GEN)/split_gemm.h: bench/floor/split_gemm.comp $(SPV_REWRITER)
	@mkdir -p $(GEN)
	$(GLSLANG) -V --target-env vulkan1.3 -o $(GEN)/split_gemm.spv $< >/dev/null
	$(SPV_REWRITER) khr-bf16 $(GEN)/split_gemm.spv $@ split_gemm_spv

$(B)/bench/vk_f32split: bench/floor/vk_f32split.c bench/floor/vk_raw.c bench/floor/vk_raw.h \
		sched/vk_khr.h $(GEN)/split_gemm.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) bench/floor/vk_f32split.c bench/floor/vk_raw.c $(LDFLAGS) -lvulkan -lm -o $@

$(B)/bench/vk_floor: bench/floor/vk_floor.c bench/floor/vk_raw.c bench/floor/vk_raw.h sched/vk_khr.h $(GEN)/add_one.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) bench/floor/vk_floor.c bench/floor/vk_raw.c $(LDFLAGS) -lvulkan -o $@

$(B)/bench/vk_ceiling: bench/floor/vk_ceiling.c bench/floor/vk_raw.c bench/floor/vk_raw.h sched/vk_khr.h \
		$(GEN)/peak_ffma.h $(GEN)/peak_dfma.h $(GEN)/peak_hmma_reg.h $(GEN)/peak_hmma_shared.h \
		$(GEN)/peak_hmma_reg_khr.h $(GEN)/peak_hmma_shared_khr.h $(B)/libnxv.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) bench/floor/vk_ceiling.c bench/floor/vk_raw.c $(B)/libnxv.a \
		$(LDFLAGS) $(LDLIBS) -o $@

# The host CPUs' single-thread pace, and a busy-polling thread's effect on it.
$(B)/bench/cpu_pace: bench/floor/cpu_pace.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) bench/floor/cpu_pace.c $(LDFLAGS) -pthread -o $@

# The op ring's push against a polling consumer (and ck_ring's, where
# concurrencykit's header is installed).
$(B)/bench/ring_push: bench/floor/ring_push.c $(B)/libnxv.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) bench/floor/ring_push.c $(B)/libnxv.a $(LDFLAGS) $(LDLIBS) -pthread -o $@

vk-floor: $(B)/bench/vk_floor

# Every benchmark, the PyTorch/JAX side where installed, report and charts.
bench-all:
	sh bench/run_all.sh

# The Erlang NIF: nif/*.c linked with the runtime into priv/.
ERL_INCLUDE ?= $(shell erl -noshell -eval 'io:format("~s/erts-~s/include", [code:root_dir(), erlang:system_info(version)]), halt().' 2>/dev/null)
NIF_SO := priv/libnx_vulkan_nif.so
NIF_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(wildcard nif/*.c))

$(B)/obj/nif/%.o: nif/%.c $(GEN)/spirv.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -I$(ERL_INCLUDE) $(CFLAGS) -MMD -MP -c $< -o $@

$(NIF_SO): $(NIF_OBJ) $(B)/libnxv.a
	@mkdir -p priv
	$(CC) -shared $(CFLAGS) $(NIF_OBJ) $(B)/libnxv.a $(LDFLAGS) $(LDLIBS) -o $@

nif: $(NIF_SO)

# The same NIF in the build tree of a sanitizer build (SAN=asan puts it in
# build/asan/); priv/'s NIF is left alone. The BEAM is not instrumented:
# load it with the sanitizer runtime preloaded (see test-nif-fuzz) and
# NX_VULKAN_NIF pointing at it.
$(B)/libnx_vulkan_nif.so: $(NIF_OBJ) $(B)/libnxv.a
	$(CC) -shared $(CFLAGS) $(NIF_OBJ) $(B)/libnxv.a $(LDFLAGS) $(LDLIBS) -o $@

nif-asan:
	$(MAKE) SAN=asan build/asan/libnx_vulkan_nif.so

$(B)/examples/demo: $(B)/obj/examples/demo.o $(B)/libnxv.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ $(LDFLAGS) $(LDLIBS) -o $@

# The main job: the demo on the default device.
demo: $(B)/examples/demo
	$(B)/examples/demo

# Tests run on lavapipe unless NX_VULKAN_DEVICE picks another device.
test-c: $(B)/test/nxv_tests
	$(B)/test/nxv_tests $(TESTS)

# The C tests again with pipelines created in the background on every
# device whose test leaves pipeline_threads unset: each op queued behind
# its pipeline's creation.
test-c-threads: $(B)/test/nxv_tests
	NX_VULKAN_PIPELINE_THREADS=4 $(B)/test/nxv_tests $(TESTS)

test-c-asan:
	$(MAKE) SAN=asan build/asan/test/nxv_tests
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	LSAN_OPTIONS=suppressions=$(CURDIR)/test/lsan.supp:print_suppressions=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  build/asan/test/nxv_tests $(TESTS)

# Twice: as the tests choose, then with 4 pipeline threads wherever they
# do not (ops queued behind creations on worker threads).
TSAN_TESTS ?= ring sched concurrency shutdown error histogram pipelines
TSAN_RUN := TSAN_OPTIONS=suppressions=$(CURDIR)/test/tsan.supp:halt_on_error=0:second_deadlock_stack=1
test-c-tsan:
	$(MAKE) SAN=tsan build/tsan/test/nxv_tests
	$(TSAN_RUN) build/tsan/test/nxv_tests $(TSAN_TESTS)
	$(TSAN_RUN) NX_VULKAN_PIPELINE_THREADS=4 build/tsan/test/nxv_tests $(TSAN_TESTS)

# The ExUnit suites (NIF, backend, Nx conformance); mix builds the NIF.
test-elixir:
	mix test

# Random calls of every NIF function, valid and malformed, against the ASan
# NIF (test/fuzz/nif_fuzz.exs): each must raise ArgumentError or
# Nx.Vulkan.Error, or return a correct result. mix picks its own build
# directory (with or without Nx). The BEAM is not instrumented: it runs
# with the ASan runtime preloaded, leak checking off (the VM's own
# allocations at exit are not the NIF's), huge allocations failing instead
# of aborting (lavapipe's device memory is host memory), and a small
# quarantine (lavapipe frees large blocks often). FUZZ_SEED replays a run.
FUZZ_CALLS ?= 100000
FUZZ_SEED  ?=
FUZZ_ASAN_OPTIONS := detect_leaks=0:allocator_may_return_null=1:quarantine_size_mb=16:malloc_context_size=10
test-nif-fuzz: nif-asan
	mix compile
	LD_PRELOAD="$$($(CC) -print-file-name=libasan.so)" \
	ASAN_OPTIONS=$(FUZZ_ASAN_OPTIONS) \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	NX_VULKAN_NIF=$(CURDIR)/build/asan/libnx_vulkan_nif \
	  mix run --no-compile --no-deps-check --no-start test/fuzz/nif_fuzz.exs \
	    --calls $(FUZZ_CALLS) $(if $(FUZZ_SEED),--seed $(FUZZ_SEED))

test: test-c test-c-threads test-c-asan test-c-tsan test-elixir test-nif-fuzz

deps:
	sh tools/install_deps.sh

clean:
	rm -rf build priv/libnx_vulkan_nif.so

-include $(shell find build -name '*.d' 2>/dev/null)
