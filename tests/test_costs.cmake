# Expected seconds of the suite's slowest tests, as CTest's COST, so that `ctest -j N` starts them
# first. CTest learns costs from a run (build/Testing/Temporary/CTestCostData.txt), but a clean
# clone (CI) has none: it would start tests in declaration order and leave the live-recovery trial
# sets, which hold a lock and run one after another, for last, with one core mostly idle behind
# them. The figures are a clean-clone `.ci/run` on the 2-core machine (rounded); they only order
# the tests. tests/arch/layering_test.cpp checks that every name here is a test of the suite.
# Included (TEST_INCLUDE_FILES) by tests/cli, the last test directory, after every test exists.
# The slow trial sets (tests/cli/CMakeLists.txt) carry their own COST.

set(_stretch_test_costs
  GptExample.TheSmallPresetLearnsWellBelowTheUnigramEntropy 98
  SimToReal.TheTransformerJobTrainsAsLongAsTheSimulatorPredicts 72
  LiveLaunch.Zero1And2SurviveTwoKillsInOneStepAndAKillDuringTheRecovery 71
  PythonExampleNetns.HostLostThenRejoinsAndTheGlobalBatchNeverChanges 49
  LiveLaunchMultiNode.ANodeLostAndANodeJoiningKeepTheJobTraining 34
  LiveLaunch.TheReplacementArrivesForTheLastStepOrAfterIt 26
  gpt_matches_pytorch 24
  LiveLaunchMultiNode.AKilledWorkersPeersOnBothNodesTrainOn 23
  LiveLaunch.AnInterimWorldSmallerThanTheSurvivorsKeepsEveryZero1Partition 23
  LiveLaunch.AKilledDigitsWorkerCostsAtMostTheStepInFlight 22
  SlurmLauncher.ANodesAgentKilledTheJobRestartsOnTheOtherNode 21
  MultiNodeNetns.TwoNamespaceHostsTrainAcrossTheBridgeAndSurviveLosingOne 19
  LiveLaunchMultiNode.ANodeLeftOutOfASmallerWorldGivesItsCopiesFirst 19
  LiveLaunch.AKilledZero2WorkerCostsAtMostTheStepInFlight 17
  fuzz_config_solver_smoke 16
  SimCalibrate.WritesAScenarioTheSimulatorRunsWithTheMeasuredFigures 14
  LiveLaunch.AKilledZero1WorkerCostsAtMostTheStepInFlight 13
  LiveLaunch.AKilledTransformerWorkerCostsAtMostTheStepInFlight 12
  Launch.AWorkerKilledAtARandomMomentIsRestartedAndTheResultIsBitwiseTheSame 11
  PythonExample.BatchContractComesFromTheVariablesThenTheDsConfigThenTheFlag 10
  LiveLaunch.TwoWorkersKilledInOneStep 10
  LiveLaunch.ComparedWithTheRestartPath 10
  LiveLaunch.AWorkerKilledDuringTheRecovery 10
  SlurmLauncher.SallocRunsOneAgentPerNodeAndTheJobTrainsAcrossThem 9
  SimCalibrate.CalibratesTheJobItIsGiven 8
  MultiNodeLocal.DeepSpeedFlagsAndNoSshRunTheSameJobAsTheNativeFlags 7
  LiveLaunch.ARankKilledWithItsBuddyFallsBackToTheCheckpoint 6
  GptLaunch.AWorkerKilledMidRunRestartsAndEndsBitwiseAsTheUninterruptedRun 6)

while(_stretch_test_costs)
  list(POP_FRONT _stretch_test_costs _name _seconds)
  set_tests_properties(${_name} PROPERTIES COST ${_seconds})
endwhile()
