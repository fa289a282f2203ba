# Every test carries a label of its kind, and only the labels below
# (README "Testing": `ctest -L unit` is the loop to run while editing).
# Run by ctest as lint_labels:
#   cmake -DCTEST=ctest -DBUILD=<build dir> -P check_labels.cmake
# Fails naming each test without a kind and each label not listed here.
cmake_minimum_required(VERSION 3.22)

# The kinds: every test has at least one.
#   unit  fast tests of one module (Criterion, small scripts, the lint);
#         the whole label runs in a minute or two on 2 cores
#   e2e   end to end: a broker (embedded, or kcat against it) and the program
#   mpi   under mpirun
#   emu   the CUDA backend on its CPU emulation (tests/gpu/emu)
#   gpu   needs a GPU for its real work (skipped, or checks clean failures,
#         without one)
set(kinds unit e2e mpi emu gpu)
# Labels a test may add to its kind.
#   slow  over ~30 s on the 2-core CI machine (`ctest -LE slow` leaves them)
#   lint  checks of the tree rather than of the code's behaviour
#   kafka the real Apache Kafka broker (tests/kafka); kafka_cluster its
#         three-node cluster (left out of the sanitizer suite)
set(extras slow lint kafka kafka_cluster)

if(NOT CTEST OR NOT BUILD)
  message(FATAL_ERROR "usage: cmake -DCTEST=ctest -DBUILD=<build dir> -P check_labels.cmake")
endif()

# ctest -N -LE lists the tests none of whose labels match: those without a kind.
list(JOIN kinds "|" kinds_re)
execute_process(COMMAND ${CTEST} --test-dir ${BUILD} -N -LE "^(${kinds_re})$"
                OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "lint_labels: `ctest -N` failed (${rc}):\n${out}")
endif()
string(REGEX MATCHALL "Test +#[0-9]+: [^\n]+" unlabelled "${out}")
set(problems "")
foreach(t ${unlabelled})
  string(REGEX REPLACE "Test +#[0-9]+: " "" t "${t}")
  string(APPEND problems "  ${t}: no kind among ${kinds} (set its LABELS where it is added)\n")
endforeach()

# ctest --print-labels: every label in use, one a line after "All Labels:".
execute_process(COMMAND ${CTEST} --test-dir ${BUILD} --print-labels OUTPUT_VARIABLE out
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT out MATCHES "All Labels:")
  message(FATAL_ERROR "lint_labels: `ctest --print-labels` failed (${rc}):\n${out}")
endif()
string(REGEX REPLACE ".*All Labels:\n" "" out "${out}")
string(REGEX MATCHALL "[^ \n]+" labels "${out}")
foreach(l ${labels})
  if(NOT l IN_LIST kinds AND NOT l IN_LIST extras)
    string(APPEND problems "  label '${l}' is none of ${kinds} ${extras} "
                           "(a typo, or add it to tests/lint/check_labels.cmake and the README)\n")
  endif()
endforeach()

if(problems)
  message(FATAL_ERROR "lint_labels:\n${problems}")
endif()
list(LENGTH labels n)
message(STATUS "lint_labels: every test has a kind; ${n} labels in use: ${labels}")
