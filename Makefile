# SPDX-License-Identifier: BSD-3-Clause
# ctrain — top-level build.
#
#   make            libctrain-core.a, libctrain.{a,so}, the ctrain CLI, the SPANK plugin; with CUDA
#                   (nvcc found, CUDA=1) also libctrain-cuda.so.0, the module libctrain loads when a
#                   run uses CUDA (engine/accelerators/cuda_module.h), installed beside libctrain.so.0
#   make demo       install missing Debian packages, build, train 5 epochs on Fashion-MNIST
#   make examples   the user programs in examples/ (their own models), against the public API
#   make test       build, then run every TAP test under t/ with prove
#   make SLURM_PREFIX=/opt/slurm   against a site's own SLURM build (headers, libslurm, plugin directory)
#   make install    PREFIX=/usr/local DESTDIR= (plugin goes to SLURM's plugin directory; the plugstack
#                   snippet to $(DATADIR)/ctrain, inert: ENABLE=1 also links it into /etc/slurm/plugstack.conf.d;
#                   its parts: install-cli install-lib install-dev install-spank)
#   make dist       ctrain-VERSION.tar.gz from the tracked files, reproducible, into build/dist/
#   make rpm        the RPM packages, built by rpmbuild from that tarball, into build/rpm/
#   make deb        the Debian packages, built by dpkg-buildpackage from a copy of the tree, into build/deb/
#   make gpu-kit    ctrain with CUDA (build-gpu/) and what it loads, packed for a GPU machine into .gpukit/
#                   (scripts/gpu-kit; scripts/gpu-check runs every GPU check from it there)
#   make test-cpus  the CPU matrix (t/cpus/matrix.t): unit tests and short fits at every x86-64 level, those
#                   below this CPU's under qemu-user's CPU models (scripts/install-deps --ci)
#   make test-debian13  the same suite on Debian 13 (SLURM 24.11, Open MPI 5, PMIx 5, PyTorch 2.6): a
#                   debootstrap root (scripts/debian13), ctrain built there into build/deb13
#   make test-arm64 ctrain for aarch64 (Grace): cross-built into build-arm64 against an arm64 Debian 12
#                   root (scripts/arm64), its unit tests, fits and SPANK plugin run under qemu-aarch64
#
# Sources are found by folder: every .c in a core folder goes into libctrain-core (no MPI, CUDA,
# BLAS or PMIx: the SPANK plugin links it inside srun and slurmstepd); every .c in a library
# folder goes into libctrain on top of it.

CC       ?= cc
# The version, in one place: the file VERSION (the release tarball carries it; `make check-version`
# checks that debian/changelog, the RPM spec and the easyconfig, which must spell it out, agree).
VERSION  := $(shell sed -n '1{s/[[:space:]]//g;p;q}' VERSION)
VERSION_DEF := -DCTRAIN_VERSION='"$(VERSION)"'
PREFIX   ?= /usr/local
DESTDIR  ?=
BUILD    ?= build
V        ?= 0

# Hardening as Debian builds packages; the plugin runs inside slurmstepd as root.
HARDEN_CFLAGS  := -fstack-protector-strong -D_FORTIFY_SOURCE=2 -fno-strict-overflow
HARDEN_LDFLAGS := -Wl,-z,relro -Wl,-z,now -Wl,--as-needed

OPT      ?= -O2
WARN     := -Wall -Wextra -Werror -Wno-unused-parameter -Wno-format-truncation -Wshadow -Wstrict-prototypes
ifneq ($(findstring clang,$(CC)),)
  WARN += -Wno-unknown-warning-option
endif
CFLAGS   ?= $(OPT) -g
# The training step's element-wise loops (bias+ReLU, optimizer updates): vectorised, and sqrtf
# without errno so it vectorises; engine/nn also clones its hot loops per ISA (target_clones on
# x86-64: engine/nn/simd.h).
# OpenMP: the element-wise passes run on the rank's threads, the same OpenMP team oneDNN's GEMMs use
# (Debian's libdnnl is built on OpenMP).
NN_CFLAGS ?= -O3 -fno-math-errno -fopenmp
ALL_CFLAGS = $(CPPFLAGS) $(CFLAGS) -std=gnu11 -fPIC $(WARN) $(HARDEN_CFLAGS) -Iinclude -I. -I$(BUILD)/gen $(SLURM_CFLAGS) -MMD -MP $(EXTRA_CFLAGS)
ALL_LDFLAGS = $(LDFLAGS) $(HARDEN_LDFLAGS) $(EXTRA_LDFLAGS)

# Dependencies, through pkg-config where Debian ships a .pc file. A cross build (scripts/arm64) gives
# its own PKG_CONFIG (the target root's .pc files, paths under SYSROOT), CC, CXX and AR.
PKG_CONFIG ?= pkg-config
SYSROOT    ?=
PKG_CORE   := hwloc libcjson
PKG_LIB    := $(PKG_CORE) pmix zlib openblas ompi-c libprotobuf-c
CORE_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKG_CORE) 2>/dev/null)
CORE_LIBS   := $(shell $(PKG_CONFIG) --libs $(PKG_CORE) 2>/dev/null) -lm
LIB_CFLAGS  := $(shell $(PKG_CONFIG) --cflags $(PKG_LIB) 2>/dev/null)
# SLURM: Debian's (headers in /usr/include/slurm, libslurm in the default search path, plugins in
# /usr/lib/<multiarch>/slurm-wlm), or a site's own build with SLURM_PREFIX=/opt/slurm: its headers
# (PREFIX/include, as system headers), libslurm from SLURM_LIBDIR (PREFIX/lib; found at run time through an rpath, as a
# site's prefix is not in ld.so's path) and its plugin directory (SLURM_LIBDIR/slurm). A SPANK
# plugin is loaded only by the SLURM release whose headers it was built with.
SLURM_PREFIX ?=
ifneq ($(SLURM_PREFIX),)
  ifeq ($(wildcard $(SLURM_PREFIX)/include/slurm/spank.h),)
    $(error SLURM_PREFIX=$(SLURM_PREFIX): no $(SLURM_PREFIX)/include/slurm/spank.h; give the prefix SLURM was installed to)
  endif
  SLURM_LIBDIR    ?= $(SLURM_PREFIX)/lib
  SLURM_PLUGINDIR ?= $(SLURM_LIBDIR)/slurm
  SLURM_CFLAGS    := -isystem $(SLURM_PREFIX)/include
  SLURM_LIBS      := -L$(SLURM_LIBDIR) -Wl,-rpath,$(SLURM_LIBDIR) -lslurm
else
  SLURM_CFLAGS    :=
  SLURM_LIBS      := -lslurm
endif
# libslurm (slurm_requeue, engine/trainer/requeue.c): Debian's libslurm-dev ships no .pc file.
# libctrain only: libctrain-core and the SPANK plugin must not link it.
# Debian's pmix.pc adds an rpath to PMIx's private directory; libpmix.so.2 is in the default search
# path too, and a Debian package must not carry an rpath (lintian: custom-library-search-path).
comma := ,
LIB_LIBS    := $(filter-out -Wl$(comma)-rpath -Wl$(comma)/% -Wl$(comma)--enable-new-dtags,\
                 $(shell $(PKG_CONFIG) --libs $(PKG_LIB) 2>/dev/null)) -ldnnl -fopenmp $(SLURM_LIBS) -lpthread -lm
TEST_LIBS   := $(shell $(PKG_CONFIG) --libs cmocka 2>/dev/null)

# CUDA is compiled when the toolkit is present; `make CUDA=0` turns it off.
CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(shell command -v nvcc 2>/dev/null || { test -x $(CUDA_HOME)/bin/nvcc && echo $(CUDA_HOME)/bin/nvcc; })
ifeq ($(origin CUDA),undefined)
  CUDA := $(if $(NVCC),1,0)
endif

# engine/health: the node's own checks (nodecheck.c, which the SPANK plugin runs) are core; the
# checks that run inside a fit (engine/health/fit: hang forensics, stragglers, preflight, which rank
# is on which node) use the strategy's collectives and the run, so they go into libctrain. A
# folder's files go where its folder is listed (wildcards do not descend into sub-folders).
# Each built-in model's own folder (engine/models/NAME/), found, not listed.
MODEL_DIRS := $(patsubst %/,%,$(sort $(wildcard engine/models/*/)))
CORE_DIRS := engine/util engine/registry engine/connector engine/bind engine/health envs
LIB_DIRS  := engine/events engine/supervise engine/nn engine/data engine/models $(MODEL_DIRS) engine/accelerators engine/collectives engine/strategies \
             engine/launchers engine/checkpoint_io engine/checkpoint engine/health/fit engine/loggers engine/run engine/callbacks engine/loops engine/trainer pmix engine/store engine/slurm \
             engine/cuda

CORE_SRC  := $(sort $(foreach d,$(CORE_DIRS),$(wildcard $(d)/*.c)))
# The CUDA module, libctrain-cuda.so.0 (engine/accelerators/cuda_module.h): libctrain and ctrain link
# no CUDA library; everything that calls CUDA, cuBLAS or NCCL is loaded (dlopen) when first used. Its
# sources are found, not listed: every .cu in a library folder (CU_SRC below), and every C file there
# whose name says cuda or nccl and that is compiled for CUDA only (#ifdef CT_HAVE_CUDA: a file moved to
# another library folder is still caught), except the loader (engine/accelerators/cuda_module*.c,
# libctrain's). Plain C about CUDA or NCCL stays in libctrain: the GPT's host side (gpt_cuda_host.c,
# which the unit tests check without a GPU), the collectives' nccl component (engine/collectives/
# nccl.c, over the loader's ct_nccl_* in nccl_loader.c). engine/cuda holds the table. Built only with CUDA=1.
CUDA_MOD_C := $(filter-out engine/accelerators/cuda_module%,$(shell grep -l '^\#ifdef CT_HAVE_CUDA' \
                $(sort $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*cuda*.c $(d)/*nccl*.c))) /dev/null))
LIB_SRC   := $(filter-out $(CUDA_MOD_C),$(sort $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))))
CLI_SRC   := $(sort $(wildcard engine/cli/*.c))
# engine/slurm/exclude.c (a requeue without a bad node) is the plugin's as well as libctrain's: its
# libslurm calls resolve in the srun or slurmstepd that loads the plugin.
SPANK_SRC := $(sort $(wildcard spank/*.c)) engine/slurm/exclude.c
TEST_SRC  := $(sort $(wildcard t/unit/test_*.c))
TOOL_SRC  := $(sort $(wildcard t/tools/*.c))

CU_SRC :=
CUDA_LIBS :=
ifeq ($(CUDA),1)
  CU_SRC      := $(sort $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.cu)))
  LIB_CFLAGS  += -DCT_HAVE_CUDA=1 -isystem $(CUDA_HOME)/include
  # The module's own: libctrain and ctrain link none of them.
  CUDA_LIBS   := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lnccl -lcudart -lstdc++
  # Explicit targets (no -arch=native: a build machine has no GPU): A100 and H100 machine code,
  # plus compute_90 PTX that the driver JIT-compiles for newer GPUs.
  CUDA_ARCH   ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
                 -gencode arch=compute_90,code=compute_90
  NVCCFLAGS   ?= -O3 -std=c++17 -Xcompiler -fPIC,-Wall,-Wextra,-Werror -Werror all-warnings \
                 -Iinclude -I. -DCT_HAVE_CUDA=1 $(CUDA_ARCH)
endif

# gloo (ddp:backend=gloo: PyTorch's CPU collectives library, for ranks without a PMIx server) is
# compiled when libgloo-dev is present; `make GLOO=0` turns it off. Its C++ (engine/**/*.cc) sits
# behind a C interface in libctrain only: libctrain-core and the SPANK plugin never link it.
CXX ?= c++
ifeq ($(origin GLOO),undefined)
  GLOO := $(if $(wildcard $(SYSROOT)/usr/include/gloo/rendezvous/context.h),1,0)
endif
CC_SRC :=
ifeq ($(GLOO),1)
  CC_SRC      := $(sort $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.cc)))
  LIB_CFLAGS  += -DCT_HAVE_GLOO=1
  LIB_LIBS    += -lgloo -lstdc++
endif

# libcrypto (OpenSSL's HMAC-SHA256, for the TCP store's optional shared secret: engine/store/
# tcpstore_auth.c) is linked when libssl-dev is present; `make CRYPTO=0` leaves it out, and a
# --store-secret-file is then refused naming the package. libctrain only, never libctrain-core.
ifeq ($(origin CRYPTO),undefined)
  CRYPTO := $(if $(wildcard $(SYSROOT)/usr/include/openssl/hmac.h),1,0)
endif
ifeq ($(CRYPTO),1)
  LIB_CFLAGS  += -DCT_HAVE_CRYPTO=1 $(shell $(PKG_CONFIG) --cflags libcrypto 2>/dev/null)
  LIB_LIBS    += $(or $(shell $(PKG_CONFIG) --libs libcrypto 2>/dev/null),-lcrypto)
endif

# Protocol buffers (TensorBoard's event records): protoc-c compiles each .proto under engine/ into
# $(BUILD)/gen/<same path>.pb-c.{c,h}, included as "engine/.../NAME.pb-c.h".
PROTO_SRC := $(sort $(wildcard engine/loggers/proto/*.proto))
PROTO_H   := $(PROTO_SRC:%.proto=$(BUILD)/gen/%.pb-c.h)
PROTO_OBJ := $(PROTO_SRC:%.proto=$(BUILD)/obj/%.pb-c.o)

CORE_OBJ  := $(CORE_SRC:%.c=$(BUILD)/obj/%.o)
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(CC_SRC:%.cc=$(BUILD)/obj/%.cc.o) $(PROTO_OBJ)
CUDA_MOD_OBJ := $(if $(filter 1,$(CUDA)),$(CUDA_MOD_C:%.c=$(BUILD)/obj/%.o) $(CU_SRC:%.cu=$(BUILD)/obj/%.cu.o))
CLI_OBJ   := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
SPANK_OBJ := $(SPANK_SRC:%.c=$(BUILD)/obj/%.o)
# ctrain-bind.so, the plugin's binding planner (spank/bind.h): built with the plugin.
SPANK_BIND_SRC := $(if $(SPANK_SRC),spank/bind-helper/ctrain-bind.c)
SPANK_BIND_OBJ := $(SPANK_BIND_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN  := $(TEST_SRC:t/unit/%.c=$(BUILD)/t/%)
TOOL_BIN  := $(TOOL_SRC:t/tools/%.c=$(BUILD)/t/%)

CORE_A   := $(BUILD)/libctrain-core.a
LIB_A    := $(BUILD)/libctrain.a
LIB_SO   := $(BUILD)/libctrain.so
CLI      := $(BUILD)/ctrain
SPANK_SO := $(BUILD)/ctrain.so
SPANK_BIND_SO := $(BUILD)/ctrain-bind.so
CUDA_MOD_SO   := $(if $(CUDA_MOD_OBJ),$(BUILD)/libctrain-cuda.so.0)
# The libctrain symbols the module uses, which a program linked with libctrain.a (ctrain, the tests)
# exports for it (--dynamic-list): read from the module's undefined symbols, so nothing else is.
# A linker script of EXTERN()s beside it makes the link take those members of libctrain.a that only
# the module uses (the GPT's host side), which a static link would otherwise leave out.
CUDA_DYNLIST  := $(if $(CUDA_MOD_SO),$(BUILD)/libctrain-cuda.dynlist)
CUDA_EXTERN   := $(if $(CUDA_MOD_SO),$(BUILD)/libctrain-cuda.extern)
CUDA_EXPORTS  := $(if $(CUDA_DYNLIST),-Wl$(comma)--dynamic-list=$(CUDA_DYNLIST))

Q := $(if $(filter 1,$(V)),,@)

.PHONY: all lib cli spank tests examples demo test test-cpus test-debian13 test-arm64 gpu-kit install uninstall deb dist rpm check-version clean check-layering check-asan fuzz fuzz-build ptxas-report
all: lib cli spank tests examples

lib: $(CORE_A) $(LIB_A) $(LIB_SO) $(CUDA_MOD_SO)
cli: $(if $(CLI_SRC),$(CLI))
spank: $(if $(SPANK_SRC),$(SPANK_SO) $(SPANK_BIND_SO))
tests: $(TEST_BIN) $(TOOL_BIN) $(BUILD)/t/forge_env.so $(BUILD)/t/stop_at_connect.so

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(filter 1,$(V)),,echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(if $(filter $(CORE_SRC) $(SPANK_SRC) $(SPANK_BIND_SRC),$<),$(CORE_CFLAGS),$(LIB_CFLAGS)) $(if $(filter engine/nn/% engine/models/%,$<),$(NN_CFLAGS)) $(if $(filter $(CLI_SRC) $(SPANK_SRC) $(SPANK_BIND_SRC) $(CUDA_VERSIONED_SRC),$<),$(VERSION_DEF)) -c $< -o $@

$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: %.proto
	@mkdir -p $(BUILD)/gen
	@echo "  PROTOC  $<"
	$(Q)protoc-c --c_out=$(BUILD)/gen -I. $<

# Generated code: the project's warnings are for the project's code.
$(BUILD)/obj/%.pb-c.o: $(BUILD)/gen/%.pb-c.c
	@mkdir -p $(dir $@)
	@$(if $(filter 1,$(V)),,echo "  CC      $<")
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -std=gnu11 -fPIC $(HARDEN_CFLAGS) -I$(BUILD)/gen $(LIB_CFLAGS) $(EXTRA_CFLAGS) -MMD -MP -c $< -o $@

# The sources that include generated headers wait for them.
$(BUILD)/obj/engine/loggers/tensorboard.o: $(PROTO_H)

# The components gather themselves: each descriptor file engine/registry/KIND_NAME.c (accelerator,
# strategy, launcher, checkpoint_io, model, datamodule) is a row of CT_ACCELERATORS / CT_STRATEGIES /
# CT_LAUNCHERS / CT_CHECKPOINT_IOS / CT_MODELS / CT_DATAMODULES in this generated header, which
# registry.c (the descriptors) and the registrations of the implementations (engine/accelerators/
# accelerators.c, engine/strategies/strategies.c, engine/trainer/register.c, engine/models/builtin.c)
# expand. Adding one is adding its files; nothing lists it
# by hand. Rewritten only when the list changes.
COMPONENT_KINDS := accelerator strategy launcher checkpoint_io model datamodule
COMPONENT_NAMES := $(basename $(notdir $(sort $(wildcard $(COMPONENT_KINDS:%=engine/registry/%_*.c)))))
# The cluster environments likewise: each file that defines ct_env_NAME_ops, built into
# libctrain-core (envs/) or registered by libctrain at start-up (pmix/).
env_names = $(sort $(shell sed -n 's/^const struct ct_env_ops ct_env_\([a-z0-9_]*\)_ops = .*/\1/p' $(1)))
ENV_NAMES            := $(call env_names,$(wildcard envs/*.c))
ENV_REGISTERED_NAMES := $(call env_names,$(wildcard pmix/*.c))
COMPONENTS_H    := $(BUILD)/gen/engine/registry/components.gen.h
$(COMPONENTS_H): FORCE
	@mkdir -p $(dir $@)
	$(Q)printf '%s\n' '/* Generated by the Makefile from engine/registry/{accelerator,strategy,launcher,checkpoint_io,model,datamodule}_*.c. */' \
	    '#define CT_ACCELERATORS(X) $(patsubst accelerator_%,X(%),$(filter accelerator_%,$(COMPONENT_NAMES)))' \
	    '#define CT_STRATEGIES(X) $(patsubst strategy_%,X(%),$(filter strategy_%,$(COMPONENT_NAMES)))' \
	    '#define CT_LAUNCHERS(X) $(patsubst launcher_%,X(%),$(filter launcher_%,$(COMPONENT_NAMES)))' \
	    '#define CT_CHECKPOINT_IOS(X) $(patsubst checkpoint_io_%,X(%),$(filter checkpoint_io_%,$(COMPONENT_NAMES)))' \
	    '#define CT_MODELS(X) $(patsubst model_%,X(%),$(filter model_%,$(COMPONENT_NAMES)))' \
	    '#define CT_DATAMODULES(X) $(patsubst datamodule_%,X(%),$(filter datamodule_%,$(COMPONENT_NAMES)))' \
	    '#define CT_ENVS(X) $(foreach e,$(ENV_NAMES),X($(e)))' \
	    '#define CT_ENVS_REGISTERED(X) $(foreach e,$(ENV_REGISTERED_NAMES),X($(e)))' >$@.tmp
	$(Q)if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; fi
# Existence first; the objects' .d files then name it where they include it.
$(CORE_OBJ) $(LIB_OBJ) $(CUDA_MOD_OBJ) $(CLI_OBJ) $(SPANK_OBJ) $(SPANK_BIND_OBJ) $(TEST_BIN) $(TOOL_BIN): | $(COMPONENTS_H)
.PHONY: FORCE
FORCE:

# `ctrain --version` and the plugin's load message name the version; the CUDA module's table and
# its loader too (a module from another build is refused).
CUDA_VERSIONED_SRC := engine/accelerators/cuda_module.c engine/cuda/cuda_table.c
$(CLI_OBJ) $(SPANK_OBJ) $(SPANK_BIND_OBJ) $(CUDA_VERSIONED_SRC:%.c=$(BUILD)/obj/%.o): VERSION
# The loader's last place to look for the module is LIBDIR (an installed ctrain in BINDIR): written
# into a header rewritten only when LIBDIR changes, so `make install LIBDIR=...` rebuilds the loader.
CUDA_LIBDIR_H := $(BUILD)/gen/engine/accelerators/cuda_module_libdir.h
$(CUDA_LIBDIR_H): FORCE
	@mkdir -p $(dir $@)
	$(Q)printf '/* Generated by the Makefile: LIBDIR, where make install puts libctrain-cuda.so.0. */\n#define CT_CUDA_MODULE_LIBDIR "%s"\n' '$(LIBDIR)' >$@.tmp
	$(Q)if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; fi
$(BUILD)/obj/engine/accelerators/cuda_module.o: $(CUDA_LIBDIR_H)

$(BUILD)/obj/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	@echo "  NVCC    $<"
	$(Q)$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/%.cc.o: %.cc
	@mkdir -p $(dir $@)
	@$(if $(filter 1,$(V)),,echo "  CXX     $<")
	$(Q)$(CXX) $(CPPFLAGS) $(CFLAGS) -std=c++17 -fPIC -Wall -Wextra -Werror -Wno-unused-parameter $(HARDEN_CFLAGS) \
	    -Iinclude -I. -DCT_HAVE_GLOO=1 -MMD -MP $(EXTRA_CFLAGS) -c $< -o $@

$(CORE_A): $(CORE_OBJ)
	@mkdir -p $(dir $@)
	@echo "  AR      $@"
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(LIB_A): $(CORE_OBJ) $(LIB_OBJ)
	@echo "  AR      $@"
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(LIB_SO): $(CORE_OBJ) $(LIB_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) -shared -Wl,-soname,libctrain.so.0 $(ALL_LDFLAGS) -o $@ $^ $(LIB_LIBS) $(CORE_LIBS)

$(CLI): $(CLI_OBJ) $(LIB_A) $(CUDA_EXTERN)
	@echo "  LD      $@"
	$(Q)$(CC) $(ALL_LDFLAGS) $(CUDA_EXPORTS) -o $@ $(CLI_OBJ) $(CUDA_EXTERN) $(LIB_A) $(LIB_LIBS) $(CORE_LIBS)

# libctrain-cuda.so.0 links the CUDA libraries (and what its objects use of libctrain's own
# dependencies, --as-needed), not libctrain: its ct_* symbols resolve in the process that loads it
# (libctrain.so, or the program linked with libctrain.a), so libctrain's state exists once. It exports
# only its table (engine/accelerators/cuda_module.map).
$(CUDA_MOD_SO): $(CUDA_MOD_OBJ) engine/accelerators/cuda_module.map
	@echo "  LD      $@"
	$(Q)$(CC) -shared -Wl,-soname,libctrain-cuda.so.0 $(ALL_LDFLAGS) -Wl,--version-script=engine/accelerators/cuda_module.map \
	    -o $@ $(CUDA_MOD_OBJ) $(CUDA_LIBS) $(LIB_LIBS) $(CORE_LIBS)

$(CUDA_DYNLIST): $(CUDA_MOD_SO)
	$(Q){ echo '{'; nm -D --undefined-only $< | awk '$$2 ~ /^ct_/ && $$2 !~ /@/ { print "  " $$2 ";" }'; echo '};'; } >$@.tmp
	$(Q)mv -f $@.tmp $@
$(CUDA_EXTERN): $(CUDA_DYNLIST)
	$(Q)sed -n 's/^  \(ct_[A-Za-z0-9_]*\);$$/EXTERN(\1)/p' $< >$@.tmp
	$(Q)mv -f $@.tmp $@

# The plugin links only libctrain-core and cJSON, and exports only the spank symbols. It is loaded
# into srun, sbatch, salloc and every slurmstepd of a cluster that lists it, ctrain's steps or not:
# hwloc (with libudev) is ctrain-bind.so's, which the plugin loads from its own directory only when
# a step binds (spank/bind.h).
SPANK_LIBS := $(shell $(PKG_CONFIG) --libs libcjson 2>/dev/null) -lm
$(SPANK_SO): $(SPANK_OBJ) $(CORE_A) spank/ctrain.map
	@echo "  LD      $@"
	$(Q)$(CC) -shared $(ALL_LDFLAGS) -Wl,--version-script=spank/ctrain.map -o $@ $(SPANK_OBJ) $(CORE_A) $(SPANK_LIBS)

# ctrain-bind.so links libctrain-core's planner with hwloc and exports only its table.
$(SPANK_BIND_SO): $(SPANK_BIND_OBJ) $(CORE_A) spank/bind-helper/ctrain-bind.map
	@echo "  LD      $@"
	$(Q)$(CC) -shared $(ALL_LDFLAGS) -Wl,--version-script=spank/bind-helper/ctrain-bind.map -o $@ $(SPANK_BIND_OBJ) $(CORE_A) $(CORE_LIBS)

$(BUILD)/t/%: t/unit/%.c $(LIB_A) $(CUDA_EXTERN)
	@mkdir -p $(dir $@)
	@echo "  TEST    $@"
	$(Q)$(CC) $(ALL_CFLAGS) $(LIB_CFLAGS) -fopenmp $(ALL_LDFLAGS) $(CUDA_EXPORTS) -o $@ $< $(CUDA_EXTERN) $(LIB_A) $(TEST_LIBS) $(LIB_LIBS) $(CORE_LIBS)

$(BUILD)/t/%: t/tools/%.c $(LIB_A) $(CUDA_EXTERN)
	@mkdir -p $(dir $@)
	@echo "  TOOL    $@"
	$(Q)$(CC) $(ALL_CFLAGS) $(LIB_CFLAGS) $(ALL_LDFLAGS) $(CUDA_EXPORTS) $(TOOL_LDFLAGS) -o $@ $< $(TOOL_OBJ) $(CUDA_EXTERN) $(LIB_A) $(TOOL_LIBS) $(LIB_LIBS) $(CORE_LIBS)

# The tools that call CUDA, cuBLAS or NCCL themselves (named cuda or nccl: cuda_check, nccl_check,
# gpt_cuda_check) link the module's objects, and export its table, which the loader then takes
# instead of loading a second copy.
CUDA_TOOL_BIN := $(if $(CUDA_MOD_OBJ),$(foreach t,$(TOOL_BIN),$(if $(findstring cuda,$(notdir $(t)))$(findstring nccl,$(notdir $(t))),$(t))))
$(CUDA_TOOL_BIN): TOOL_OBJ := $(CUDA_MOD_OBJ)
$(CUDA_TOOL_BIN): TOOL_LIBS := $(CUDA_LIBS)
$(CUDA_TOOL_BIN): TOOL_LDFLAGS := -Wl,--export-dynamic-symbol=ct_cuda_module_v1
$(CUDA_TOOL_BIN): $(CUDA_MOD_OBJ)

# t/28 runs the store's peer in the Debian 13 root, which has none of Debian 12's libraries: it
# needs only the C library (and the sanitizers' runtimes in build-asan, which --no-as-needed would
# otherwise fill with every library libctrain links).
$(BUILD)/t/tcpstore_peer: TOOL_LDFLAGS := -Wl,--as-needed
$(BUILD)/t/tcpstore_peer: CUDA_EXTERN :=
$(BUILD)/t/tcpstore_peer: CUDA_EXPORTS :=

# t/48's stand-in for a modified srun: a SPANK plugin that rewrites the job's environment.
# It is loaded into srun and slurmstepd, which are not ASan programs: never built with EXTRA_*FLAGS
# (check-asan's sanitizers), like the plugin itself.
$(BUILD)/t/forge_env.so: t/spank/forge_env.c
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(filter-out $(EXTRA_CFLAGS),$(ALL_CFLAGS)) -fPIC -shared $(LDFLAGS) $(HARDEN_LDFLAGS) -o $@ $<

# t/29's rank that stops at its first connection to a gloo peer (LD_PRELOAD): no EXTRA_*FLAGS, a
# sanitizer's runtime must not be preloaded a second time (check-asan's ranks allow the order).
$(BUILD)/t/stop_at_connect.so: t/preload/stop_at_connect.c
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(filter-out $(EXTRA_CFLAGS),$(ALL_CFLAGS)) -fPIC -shared $(LDFLAGS) $(HARDEN_LDFLAGS) -o $@ $< -ldl

# scripts/slurm-cluster's packet holder (link delay without tc netem): libnetfilter-queue only.
$(BUILD)/t/nfq_delay: t/tools/nfq_delay.c
	@mkdir -p $(dir $@)
	@echo "  TOOL    $@"
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(shell $(PKG_CONFIG) --libs libnetfilter_queue 2>/dev/null || echo -lnetfilter_queue)

# Examples are built as a user's program is: the public headers (<ctrain/...>) and libctrain.so,
# nothing from engine/.
EXAMPLE_SRC := $(sort $(wildcard examples/*.c))
EXAMPLE_BIN := $(EXAMPLE_SRC:examples/%.c=$(BUILD)/examples/%)
examples: $(EXAMPLE_BIN)

$(BUILD)/examples/%: examples/%.c $(LIB_SO)
	@mkdir -p $(dir $@)
	@echo "  EXAMPLE $@"
	$(Q)ln -sf libctrain.so $(BUILD)/libctrain.so.0
	$(Q)$(CC) $(CFLAGS) -std=gnu11 $(WARN) -Iinclude $(EXTRA_CFLAGS) $(ALL_LDFLAGS) -o $@ $< -L$(BUILD) -lctrain \
	    -Wl,-rpath,$(abspath $(BUILD)) -lm

demo:
	scripts/install-deps
	$(MAKE) all
	$(CLI) fit --max-epochs 5 --default-root-dir runs/demo

# t/suite runs every test file under prove, TEST_JOBS at a time, each under a TEST_TIMEOUT (see
# t/suite and t/README.md).
TEST_JOBS    ?= 4
TEST_TIMEOUT ?= 900
SUITE        := TEST_JOBS=$(TEST_JOBS) TEST_TIMEOUT=$(TEST_TIMEOUT) t/suite

test: all
	$(SUITE)

# The CPU matrix: x86-64-v2, v3, v4 and bf16, natively at this CPU's level, under
# `qemu-x86_64 -cpu Haswell|Nehalem` below it (t/cpus/matrix.t says what runs and why).
test-cpus: all
	prove -v --timer t/cpus/matrix.t

# The second platform: scripts/debian13 makes (once) a Debian 13 root and runs commands in it, with
# this tree at the same path; ctrain is built there into its own build directory, so the host's
# build/ stays the host's.
DEB13_BUILD ?= build/deb13
DEB13_JOBS  ?= $(shell nproc)
test-debian13:
	scripts/debian13 setup
	scripts/debian13 run $(MAKE) -j$(DEB13_JOBS) BUILD=$(DEB13_BUILD) all
	scripts/debian13 run env CTRAIN_BUILD=$(DEB13_BUILD) CTRAIN_PEERS_VENV=/opt/ctrain-peers $(SUITE)

# aarch64 (README, "aarch64 (Grace) nodes"): scripts/arm64 makes (once) an arm64 Debian 12 root and
# cross-builds this tree against it into build-arm64 (CUDA left out: Debian has no arm64 CUDA); the
# test runs it under qemu-aarch64 against the x86-64 build's own runs (hence `all` first).
ARM64_JOBS ?= $(shell nproc)
test-arm64: all
ifeq ($(shell uname -m),aarch64)
	@echo "test-arm64: this machine is aarch64: make test runs ctrain natively here"
else
	scripts/arm64 setup
	scripts/arm64 make -j$(ARM64_JOBS) all
	prove -v --timer t/arm64/arm64.t
endif

# Registers, spills and shared memory per kernel and architecture (ptxas -v), one tab-separated line
# each: file, arch, kernel, registers, spill stores, spill loads, smem bytes. Fails when one spills.
ptxas-report:
ifeq ($(CUDA),1)
	@printf 'file\tarch\tkernel\tregisters\tspill_stores\tspill_loads\tsmem_bytes\n'
	$(Q)rc=0; for f in $(CU_SRC); do scripts/ptxas-report $(NVCC) $$f $(NVCCFLAGS) || rc=1; done; exit $$rc
else
	@echo "ptxas-report: no CUDA in this build (nvcc not found, or CUDA=0)" >&2; exit 1
endif

check-layering:
	t/90-layering.t

gpu-kit:
	scripts/gpu-kit

# --- sanitizers and fuzzing --------------------------------------------------------------------
# check-asan: the whole suite against an ASan+UBSan build in build-asan/ (tests find their binaries
# through CTRAIN_BUILD). The SPANK plugin is the plain build's (build/ctrain.so, copied there): it is
# loaded into slurmd/slurmstepd, which are not ASan programs; valgrind checks it instead (t/4x tests).
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
# Every test program keeps libpmix loaded (Open MPI would load and unload it), so LeakSanitizer can
# name PMIx's frames for t/lsan.supp; the full unwinder sees through Open MPI's and PMIx's frames
# (Debian builds them without frame pointers), which the suppressions match.
SAN_LDFLAGS := -Wl,--no-as-needed
SAN_ASAN_OPTIONS := detect_leaks=1:abort_on_error=1:fast_unwind_on_malloc=0
check-asan:
	$(MAKE) BUILD=build-asan OPT=-O1 EXTRA_CFLAGS="$(SAN_FLAGS)" EXTRA_LDFLAGS="$(SAN_FLAGS) $(SAN_LDFLAGS)" lib cli tests examples
	$(MAKE) BUILD=build spank
	$(if $(SPANK_SRC),cp build/ctrain.so build/ctrain-bind.so build-asan/)
	CTRAIN_BUILD=build-asan ASAN_OPTIONS=$(SAN_ASAN_OPTIONS) UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/t/lsan.supp:print_suppressions=0 $(SUITE)

# fuzz: libFuzzer targets t/fuzz/fuzz_<name>.c built with clang against libctrain compiled with
# the fuzzer's coverage; each runs FUZZ_SECONDS on its seed corpus t/fuzz/corpus/<name>/ (new inputs
# go to build-fuzz/corpus/<name>/, a crash to build-fuzz/crash-<name>-*, with the dictionary
# t/fuzz/<name>.dict when there is one). A finding stops make with the fuzzer's report.
# FUZZ_RUNS stops a target earlier, after that many executions (-1: no limit). The targets' own
# stderr (the SPANK plugin logs every refused option) is closed; libFuzzer's and the sanitizers'
# reports still reach the log.
FUZZ_SECONDS ?= 60
FUZZ_RUNS    ?= -1
FUZZ_TARGETS ?= $(patsubst t/fuzz/fuzz_%.c,%,$(sort $(wildcard t/fuzz/fuzz_*.c)))
FUZZ_BUILD   := build-fuzz
FUZZ_BIN     := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)
# clang knows not every gcc warning the build names (-Wno-format-truncation), and at -O1 it does
# not vectorise every `omp simd` loop the cpu GPT's passes ask for (a warning, not a fault).
FUZZ_FLAGS   := -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer \
                -fno-sanitize-recover=undefined -Wno-unknown-warning-option -Wno-pass-failed

# The SPANK targets link the plugin's objects (built with coverage too) and SLURM's libslurmfull,
# which holds the SPANK API that slurmd and srun give the plugin.
SLURM_FULL_DIR := $(dir $(firstword $(wildcard $(if $(SLURM_PREFIX),$(SLURM_LIBDIR)/slurm/libslurmfull.so) \
                    /usr/lib/*/slurm-wlm/libslurmfull.so /usr/lib/slurm/libslurmfull.so)))
FUZZ_SPANK_OBJ := $(SPANK_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
$(FUZZ_BUILD)/fuzz_spank_%: FUZZ_EXTRA = $(FUZZ_SPANK_OBJ) -L$(SLURM_FULL_DIR) -Wl,-rpath,$(SLURM_FULL_DIR) -lslurmfull

fuzz-build:
	$(MAKE) BUILD=$(FUZZ_BUILD) CC=clang CUDA=0 GLOO=0 OPT=-O1 EXTRA_CFLAGS="$(FUZZ_FLAGS)" lib \
	  $(if $(filter spank_%,$(FUZZ_TARGETS)),$(FUZZ_SPANK_OBJ))
	$(MAKE) CUDA=0 GLOO=0 $(FUZZ_BIN)

$(FUZZ_BUILD)/fuzz_%: t/fuzz/fuzz_%.c t/fuzz/fuzz_env.h $(FUZZ_BUILD)/libctrain.a
	@echo "  FUZZ    $@"
	$(Q)clang -O1 -g -std=gnu11 -Wall -Wextra -Werror -Iinclude -I. $(LIB_CFLAGS) -fsanitize=fuzzer,address,undefined \
	  -fno-sanitize-recover=undefined -o $@ $< $(FUZZ_EXTRA) $(FUZZ_BUILD)/libctrain.a $(LIB_LIBS) $(CORE_LIBS)

fuzz: fuzz-build
	@for name in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$name; \
	  dict=; [ -f t/fuzz/$$name.dict ] && dict=-dict=t/fuzz/$$name.dict; \
	  echo "== $$name ($(FUZZ_SECONDS)s, runs $(FUZZ_RUNS))"; \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  $(FUZZ_BUILD)/fuzz_$$name -max_total_time=$(FUZZ_SECONDS) -runs=$(FUZZ_RUNS) -close_fd_mask=2 -print_final_stats=1 $$dict \
	    -artifact_prefix=$(FUZZ_BUILD)/crash-$$name- $(FUZZ_BUILD)/corpus/$$name t/fuzz/corpus/$$name \
	    >$(FUZZ_BUILD)/$$name.log 2>&1; rc=$$?; \
	  grep -E '^#[0-9]+.*DONE|stat::number_of_executed_units|stat::average_exec_per_sec' $(FUZZ_BUILD)/$$name.log; \
	  if [ $$rc -ne 0 ]; then \
	    grep -A40 -E '^==[0-9]+==|runtime error|deadly signal' $(FUZZ_BUILD)/$$name.log | head -60; \
	    echo "fuzz: $$name found a problem (exit $$rc); log $(FUZZ_BUILD)/$$name.log"; exit 1; \
	  fi; \
	done

# --- install -----------------------------------------------------------------------------------
# Inert by default: the plugstack snippet goes to $(DATADIR)/ctrain/plugstack.conf.d/, and SLURM does
# not read it until an admin links it into a directory plugstack.conf includes (README, "SPANK
# plugin — for admins"). ENABLE=1 makes that link too. debian/rules and rpm/ctrain.spec install
# through this target; EasyBuild (easybuild/) installs the parts a module holds (install-cli
# install-lib install-dev: no plugin).
# The directories are GNU's (bindir, libdir, includedir, datadir, mandir, sysconfdir), spelt in
# capitals as this Makefile's variables are, each below PREFIX unless given; DESTDIR is prepended
# to every one of them. ctrain installs nothing in SYSCONFDIR itself: an RPM puts the snippet there
# (SNIPPET=, rpm/ctrain.spec). The ENABLE=1 link goes to SLURM's configuration directory,
# SLURM_CONFDIR, not ctrain's.
LIBDIR      ?= $(PREFIX)/lib
BINDIR      ?= $(PREFIX)/bin
INCLUDEDIR  ?= $(PREFIX)/include
DATADIR     ?= $(PREFIX)/share
MANDIR      ?= $(DATADIR)/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
SYSCONFDIR  ?= $(PREFIX)/etc
SLURM_CONFDIR ?= /etc/slurm
ENABLE      ?= 0
SLURM_PLUGINDIR ?= $(shell $(PKG_CONFIG) --variable=libdir slurm 2>/dev/null | sed 's|$$|/slurm|;s|^/slurm$$||')
ifeq ($(SLURM_PLUGINDIR),)
  SLURM_PLUGINDIR := /usr/lib/$(shell $(CC) -print-multiarch)/slurm-wlm
endif
SNIPPET     ?= $(DATADIR)/ctrain/plugstack.conf.d/ctrain.conf
SNIPPET_LINK := $(SLURM_CONFDIR)/plugstack.conf.d/ctrain.conf

# The API a user's model and program use (README, "Your own model"): the model and data module
# headers, the Trainer's entry points the example calls (engine, connector, trainer) and what those
# include. The rest of include/ctrain/ is libctrain's own and is not installed (t/90 checks this
# list is exactly that closure).
PUBLIC_HEADERS := accelerator callback config connector datamodule dtype engine environment error model nn registry \
                  rng trainer

.PHONY: install-cli install-lib install-dev install-spank
install: install-cli install-lib install-dev install-spank

install-cli: cli
	install -d $(DESTDIR)$(BINDIR)
	install -m 755 $(CLI) $(DESTDIR)$(BINDIR)/ctrain

install-lib: lib
	install -d $(DESTDIR)$(LIBDIR)
	install -m 644 $(LIB_SO) $(DESTDIR)$(LIBDIR)/libctrain.so.0
	$(if $(CUDA_MOD_SO),install -m 644 $(CUDA_MOD_SO) $(DESTDIR)$(LIBDIR)/libctrain-cuda.so.0)

install-dev: lib
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR)/ctrain $(DESTDIR)$(PKGCONFIGDIR)
	install -m 644 $(LIB_A) $(CORE_A) $(DESTDIR)$(LIBDIR)/
	ln -sf libctrain.so.0 $(DESTDIR)$(LIBDIR)/libctrain.so
	install -m 644 $(PUBLIC_HEADERS:%=include/ctrain/%.h) $(DESTDIR)$(INCLUDEDIR)/ctrain/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	    -e 's|@VERSION@|$(VERSION)|' ctrain.pc.in >$(DESTDIR)$(PKGCONFIGDIR)/ctrain.pc
	chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/ctrain.pc

install-spank: spank
	install -d $(DESTDIR)$(SLURM_PLUGINDIR) $(DESTDIR)$(dir $(SNIPPET)) $(DESTDIR)$(MANDIR)/man8
	install -m 644 $(SPANK_SO) $(DESTDIR)$(SLURM_PLUGINDIR)/ctrain.so
	install -m 644 $(SPANK_BIND_SO) $(DESTDIR)$(SLURM_PLUGINDIR)/ctrain-bind.so
	sed -e 's|@PLUGINDIR@|$(SLURM_PLUGINDIR)|' -e 's|@SNIPPET@|$(SNIPPET)|' scripts/plugstack.conf.d/ctrain.conf >$(DESTDIR)$(SNIPPET)
	chmod 644 $(DESTDIR)$(SNIPPET)
	install -m 644 spank/ctrain-spank.8 $(DESTDIR)$(MANDIR)/man8/
ifeq ($(ENABLE),1)
	install -d $(DESTDIR)$(dir $(SNIPPET_LINK))
	ln -sfn $(SNIPPET) $(DESTDIR)$(SNIPPET_LINK)
endif

# The enabling link goes only when it is ours (an admin's own ctrain.conf stays).
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/ctrain $(DESTDIR)$(LIBDIR)/libctrain.a $(DESTDIR)$(LIBDIR)/libctrain-core.a \
	      $(DESTDIR)$(LIBDIR)/libctrain.so $(DESTDIR)$(LIBDIR)/libctrain.so.0 $(DESTDIR)$(LIBDIR)/libctrain-cuda.so.0 \
	      $(DESTDIR)$(PKGCONFIGDIR)/ctrain.pc \
	      $(DESTDIR)$(SLURM_PLUGINDIR)/ctrain.so $(DESTDIR)$(SLURM_PLUGINDIR)/ctrain-bind.so $(DESTDIR)$(SNIPPET) $(DESTDIR)$(MANDIR)/man8/ctrain-spank.8
	if [ "$$(readlink $(DESTDIR)$(SNIPPET_LINK))" = "$(SNIPPET)" ]; then rm -f $(DESTDIR)$(SNIPPET_LINK); fi
	rm -rf $(DESTDIR)$(INCLUDEDIR)/ctrain
	-rmdir $(DESTDIR)$(dir $(SNIPPET)) $(DESTDIR)$(DATADIR)/ctrain 2>/dev/null

# --- release tarball -----------------------------------------------------------------------------
# make dist: $(DIST_DIR)/ctrain-VERSION.tar.gz, the files git tracks (as they are in the working
# tree) under ctrain-VERSION/. Reproducible: every entry's time is the last commit's
# (SOURCE_DATE_EPOCH, unless given), names sorted bytewise, owner and group 0/0 by number, modes
# 0644 or 0755 (git's executable bit) and 0755 for directories, gzip without name or time (-n): the
# same tree gives the same bytes (t/82-dist.t). The tarball needs no git: make, make install and
# the packages (rpm/, easybuild/; debian/ for dpkg-buildpackage) build from it.
DIST_DIR ?= $(BUILD)/dist
DIST     := $(DIST_DIR)/ctrain-$(VERSION).tar.gz
# The versions that the packaging formats spell out themselves agree with VERSION.
check-version:
	@v=$$(awk 'NR == 1 { v = $$2; gsub(/[()]/, "", v); sub(/^[0-9]+:/, "", v); sub(/-[^-]*$$/, "", v); print v; exit }' debian/changelog); \
	  [ "$$v" = "$(VERSION)" ] || { echo "ctrain: debian/changelog's first entry is $$v, VERSION says $(VERSION): add a changelog entry (dch -v $(VERSION))" >&2; exit 1; }
	@v=$$(sed -n 's/^Version:[[:space:]]*//p' rpm/ctrain.spec); \
	  [ "$$v" = "$(VERSION)" ] || { echo "ctrain: rpm/ctrain.spec's Version is $$v, VERSION says $(VERSION): update Version and %changelog" >&2; exit 1; }
	@for f in $(wildcard easybuild/*.eb); do \
	  case $$f in easybuild/ctrain-$(VERSION).eb|easybuild/ctrain-$(VERSION)-*.eb) ;; \
	    *) echo "ctrain: $$f is not named for VERSION $(VERSION) (easybuild/ctrain-$(VERSION)[-TOOLCHAIN].eb)" >&2; exit 1 ;; esac; \
	  grep -q "^version = '$(VERSION)'$$" $$f || { echo "ctrain: $$f: its version = '...' line is not VERSION's $(VERSION)" >&2; exit 1; }; \
	done

dist: check-version
	@git rev-parse --is-inside-work-tree >/dev/null 2>&1 || \
	  { echo "ctrain: make dist: needs a git checkout (the tarball holds the files git tracks)" >&2; exit 1; }
	@mkdir -p $(DIST_DIR)
	$(Q)set -e; epoch=$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct)}; list=$(DIST).list; \
	  git -c core.quotepath=off ls-files --deleted >$$list.deleted; \
	  git -c core.quotepath=off ls-files --cached | grep -vxF -f $$list.deleted | \
	    awk '{ print; n = split($$0, p, "/"); d = ""; for (i = 1; i < n; i++) { d = d p[i] "/"; print d } }' | \
	    LC_ALL=C sort -u | tr '\n' '\0' >$$list; \
	  LC_ALL=C tar --null --no-recursion -T $$list --format=gnu --owner=0 --group=0 --numeric-owner \
	    --mode=u=rwX,go=rX --mtime=@$$epoch --transform='s|^|ctrain-$(VERSION)/|S' -cf $(DIST).tar; \
	  gzip -9n <$(DIST).tar >$(DIST).tmp; \
	  rm -f $$list $$list.deleted $(DIST).tar; mv -f $(DIST).tmp $(DIST)
	@echo "  DIST    $(DIST)"

# --- RPM packages --------------------------------------------------------------------------------
# make rpm: rpmbuild -ta on the release tarball (its rpm/ctrain.spec), in $(RPM_DIR) (rpmbuild's
# _topdir: SRPMS/ and RPMS/<arch>/), then rpmlint with rpm/rpmlint.toml on the spec and the packages.
# On a machine without an RPM database of the build dependencies (Debian, with rpmbuild from
# Debian's rpm package), rpmbuild cannot check BuildRequires against installed packages: --nodeps
# builds with what the machine has (scripts/install-deps installs it under Debian's names); and the
# build scriptlets and brp-compress (which compresses the man pages) run by bash, as on the RHEL
# family: Debian's rpm runs them with /bin/sh, which is dash there, and brp-compress uses bash's
# `read -d`.
RPM_DIR ?= $(BUILD)/rpm
RPMBUILD_FLAGS ?= $(if $(wildcard /etc/debian_version),--nodeps --define '_buildshell /bin/bash' \
                    --define '__brp_compress bash %{_rpmconfigdir}/brp-compress %{?_prefix}')
rpm: dist
	rm -rf $(RPM_DIR)
	mkdir -p $(RPM_DIR)
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL rpmbuild -ta $(RPMBUILD_FLAGS) --define '_topdir $(abspath $(RPM_DIR))' $(DIST)
	rpmlint -c rpm/rpmlint.toml rpm/ctrain.spec $(RPM_DIR)/SRPMS/*.rpm $(RPM_DIR)/RPMS/*/*.rpm

# --- Debian packages ---------------------------------------------------------------------------
# dpkg-buildpackage builds from a copy of the tree's files (tracked, and untracked but not ignored)
# in build/deb/ctrain-VERSION, so its `debian/rules clean` never touches this tree's build/, and
# none of this make's variables reach it. The .deb files land in build/deb/ (DEB_DIR=DIR: there);
# then lintian must report no error and no warning (debian/README.source). DEB_BUILD_OPTIONS is
# dpkg-buildpackage's (e.g. "nocheck parallel=2").
DEB_DIR ?= $(BUILD)/deb
deb: check-version
	@git rev-parse --is-inside-work-tree >/dev/null 2>&1 || \
	  { echo "ctrain: make deb: needs a git checkout (it packages the files git knows)" >&2; exit 1; }
	rm -rf $(DEB_DIR)
	mkdir -p $(DEB_DIR)/ctrain-$(VERSION)
	git ls-files -z --cached --others --exclude-standard | \
	  tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -C $(DEB_DIR)/ctrain-$(VERSION) -xf -
	cd $(DEB_DIR)/ctrain-$(VERSION) && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL dpkg-buildpackage -b -us -uc
	lintian --fail-on error,warning $(DEB_DIR)/*.changes

clean:
	rm -rf $(BUILD) build-asan build-gpu build-arm64 .gpukit $(FUZZ_BUILD)

-include $(shell find $(BUILD)/obj $(BUILD)/t -name '*.d' 2>/dev/null)
