# Expected seconds of the suite's slowest tests, as CTest's COST, so that `ctest -j N` starts them
# first. CTest learns costs from a run (build/Testing/Temporary/CTestCostData.txt), but a clean
# clone (CI) has none: it would start tests in declaration order and leave the live-recovery trial
# sets, which hold a lock and run one after another, for last, with one core mostly idle behind
# them. The figures are one run of the whole suite on the 2-core machine (2026-11-28, every test
# package installed, rounded); they only order the tests. tests/arch/layering_test.cpp checks that every name here is a test of the suite.
# Included (TEST_INCLUDE_FILES) by tests/cli, the last test directory, after every test exists.
# The slow trial sets (tests/cli/CMakeLists.txt) carry their own COST.

set(_stretch_test_costs
  python_torch_live 190
  PythonExampleNetns.HostLostThenRejoinsAndTheGlobalBatchNeverChanges 56
  LiveLaunch.Zero1And2SurviveTwoKillsInOneStepAndAKillDuringTheRecovery 51
  LiveLaunchMultiNode.ANodeLostAndANodeJoiningKeepTheJobTraining 34
  SimCalibrate.WritesAScenarioTheSimulatorRunsWithTheMeasuredFigures 30
  LiveLaunch.TheReplacementArrivesForTheLastStepOrAfterIt 30
  install_find_package 26
  install_deb 24
  LiveLaunchMultiNode.AKilledWorkersPeersOnBothNodesTrainOn 24
  SlurmLauncher.ANodesAgentKilledTheJobRestartsOnTheOtherNode 23
  SimToReal.TheTransformerJobTrainsAsLongAsTheSimulatorPredicts 22
  GptExample.TheSmallPresetLearnsWellBelowTheUnigramEntropy 21
  MultiNodeNetns.TwoNamespaceHostsTrainAcrossTheBridgeAndSurviveLosingOne 20
  LiveLaunchMultiNode.ANodeLeftOutOfASmallerWorldGivesItsCopiesFirst 20
  SimCalibrate.CalibratesTheJobItIsGiven 20
  fuzz_config_solver_smoke 16
  LiveLaunch.AnInterimWorldSmallerThanTheSurvivorsKeepsEveryZero1Partition 15
  gpt_matches_pytorch 13
  PythonExample.BatchContractComesFromTheVariablesThenTheDsConfigThenTheFlag 13
  SlurmLauncher.SallocRunsOneAgentPerNodeAndTheJobTrainsAcrossThem 10
  MultiNodeLocal.HungNodeIsDroppedWhenItsKeepAliveTimesOut 9
  LiveLaunch.ComparedWithTheRestartPath 8
  LiveLaunch.AWorkerKilledDuringTheRecovery 7
  MultiNodeLocal.DeepSpeedFlagsAndNoSshRunTheSameJobAsTheNativeFlags 7
  SimToReal.TheRealJobAndTheSimulatorTakeTheSameDecisions 7
  MultiNodeLocal.NodeLeavesThenANewNodeJoinsAndTheGlobalBatchNeverChanges 7
  LiveLaunch.TwoWorkersKilledInOneStep 7
  deepspeed_peer_reproduces_vectors 6)

while(_stretch_test_costs)
  list(POP_FRONT _stretch_test_costs _name _seconds)
  set_tests_properties(${_name} PROPERTIES COST ${_seconds})
endwhile()
