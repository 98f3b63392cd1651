# Front end for the CMake build. `make demo` and `make test` do all the set-up themselves.
PRESET ?= release
BUILD_DIR := build/$(PRESET)
JOBS ?= $(shell nproc)
# ctest's slots: twice the cores. A unit test (and a few CPU-bound integration tests) takes
# two slots; most integration tests mostly wait on brokers, clients and timeouts and take one
# (docs/design/0029 decision 5: half the CPU was idle at -j 2).
TEST_JOBS ?= $(shell echo $$(( 2 * $(JOBS) )))

.PHONY: setup configure build demo test test-slow test-asan bench bench-kafka install deb format format-check tidy clean

setup:
	@scripts/setup.sh

configure: setup
	@cmake --preset $(PRESET) >/dev/null

# build only builds (configuring if needed); it does not install packages.
build:
	@test -f $(BUILD_DIR)/build.ninja || cmake --preset $(PRESET) >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# sluice's main job end to end (scripts/demo.sh): the broker on a free loopback port,
# sample events produced with kcat, two SQL pipelines (an Iceberg table through the
# iceberg sink, and the console), the result queried and checked, SIGTERM for all.
# `sluice demo` alone is the broker's demo (produce and consume with librdkafka).
# It builds only the `sluice` binary (no tests, fuzz targets or benchmarks' helpers).
demo: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target sluice
	@SLUICE=$(BUILD_DIR)/sluice scripts/demo.sh

test: configure
	@scripts/check-format.sh
	@$(MAKE) --no-print-directory build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(TEST_JOBS) -L 'unit|integration'

test-slow: configure
	@$(MAKE) --no-print-directory build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) -L slow

test-asan:
	@$(MAKE) --no-print-directory PRESET=asan TEST_JOBS=$(JOBS) test  # ASan's memory: one slot a core

bench: configure
	@$(MAKE) --no-print-directory build
	@$(BUILD_DIR)/sluice bench disk

# The broker through librdkafka beside loopback TCP (iperf3), full size.
bench-kafka: configure
	@$(MAKE) --no-print-directory build
	@$(BUILD_DIR)/sluice bench kafka

# Installs the release build's sluice under PREFIX (default /usr/local; DESTDIR for a
# staging root): bin/sluice stripped, lib/sluice/libduckdb.so beside it (found through
# $ORIGIN, so the tree can be copied anywhere), the debug information under
# lib/debug/.build-id, the systemd unit, the config file (never overwritten) and the docs
# (docs/install.md).
PREFIX ?= /usr/local
install: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target sluice
	@DESTDIR="$(DESTDIR)" cmake --install $(BUILD_DIR) --prefix $(PREFIX)

# The Debian packages sluice and sluice-dbgsym in build/<preset>/packages/ (dpkg-deb only;
# docs/install.md).
deb: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target sluice
	@scripts/make-deb.sh $(BUILD_DIR)

format:
	@git ls-files '*.h' '*.cc' | xargs clang-format-14 -i

format-check:
	@scripts/check-format.sh

# clang-tidy reads each file's flags from a configuration without unity batches (the
# build's compile_commands.json names the batches, not the files).
tidy:
	@cmake -S . -B build/tidy -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_UNITY_BUILD=OFF \
	  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
	@git ls-files 'src/*.cc' | xargs clang-tidy -p build/tidy --quiet

clean:
	@rm -rf build
