package server

import (
	"go/ast"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/servertest"
	"github.com/leasehold/leasehold/internal/testutil"
)

// transportTestNames names the tests whose behaviour depends on the transport
// that serves the connections: how a socket is read and written, on an
// event loop or on a goroutine per connection. `make test` runs the whole
// package once over the default transport (one event loop on Linux), then
// again over each other transport (servertest.IOLoopsEnv 0 and 2) with
// servertest.TransportOnlyEnv=1, when these tests alone run: testConfig
// skips every other one, saying that it ran in the main pass.
//
// A test belongs here when what it checks goes through the transport:
// output limits and backpressure, pipelining and fairness between clients,
// TLS, pub/sub delivery, WAITs parked and woken (granted, timed out,
// unblocked, closed), idle timeouts, hang-ups noticed, shutdown, malformed
// and hostile input, prefetching, and the event loop's regressions. When in
// doubt, a test is listed. TestListedTransportTestsExist fails when a name
// here is no test of the package, so that a rename cannot drop a test from
// the transport passes unnoticed.
//
// Not listed, because they do not depend on the transport:
//   - the cluster's tests of what the group does, not how a connection is
//     served (failover, restart, migration, TLS between nodes, settings,
//     restart grace, LOCKSTATS and command statistics); those whose
//     connections park, pipeline or hang up on a node are listed below;
//   - tests that pick each transport themselves (transports in
//     cmdstats_test.go, TestSetIdleTimeout, TestStatusListsAtMostAHundredHolders
//     and the other paging tests, TestDiskFullMisconf, TestDiskFsyncFailureStops,
//     TestMisconfPipelineAndWait): one pass runs them over every transport;
//   - tests of the commands' meaning, of ACL rules, persistence, statistics
//     and the status page, which reach the server through a client but
//     check what the lock table and the command handlers answer.
//
// Tests that never call testConfig (no server, or one built from
// DefaultConfig) do not read IOLoopsEnv and run in every pass as they are.
var transportTestNames = []string{
	// Cluster mode on the transport: replies parked until their entry is
	// applied, commands deferred behind them, WAITs on a loop's timers and
	// hand-offs, CLIENT UNBLOCK, hang-ups, forwards from many clients.
	"TestClusterPipelineKeepsReplyOrder", "TestClusterPipelineOfNoChangeIsAnswered", "TestRedisLockThroughFollower",
	"TestClusterFollowerReadsAndEvents", "TestClusterEphemeralEndsWithItsConnection",
	"TestClusterWait", "TestClusterWaitSurvivesLeaderLoss", "TestClusterMAcquireWait", "TestClusterClientUnblock",
	"TestClusterForwardsManyClients", "TestClusterRedirect",
	// The smoke tests, once per transport.
	"TestSmokeGoRedis", "TestSmokeInline",
	// Connections: QUIT, inline commands, CLIENT, hang-ups, idle timeouts.
	"TestQuit", "TestInline", "TestClient", "TestConfigTimeout",
	"TestProtectedMode",
	"TestEphemeralLeaseEndsWithItsConnection", "TestEphemeralLeaseFromTheQueue",
	"TestEphemeralTieMovesWithOwnerRetry", "TestSharedEphemeralPerLease",
	// Malformed and hostile input, limits before AUTH.
	"TestMalformed", "TestTrickledLargeArgument", "TestIdleTimeout", "TestMaxClients",
	"TestHandlerPanic", "TestCloseWithClients", "TestCloseWaitsForRunningHandler",
	"TestRandomSplits", "FuzzCommands",
	"TestCrossProtocolRequestClosesConnection",
	"TestAuthPreAuthLimits", "TestACLPreAuthLimits",
	"TestBystanderKeepsItsLeaseUnderAttack",
	// Output: limits, backpressure, fairness, the write path.
	"TestClientThatDoesNotRead", "TestNonReadingClientOutputIsBounded",
	"TestPipelineYieldsToOtherClients", "TestClientWritingBeforeReadingDoesNotDeadlock",
	"TestReadAheadIsBoundedByQueryBuffer",
	"TestOutputLimitDisconnectsNonReadingClient", "TestOutputLimitSlowSubscriber",
	"TestWriteSocketSoftLimitCloses",
	"TestFlushCommitsBeforeWriting", "TestPersistGroupCommit",
	// The event loop's regressions and prefetching.
	"TestHalfClosedClientWithPendingRepliesIsNotWatchedForRDHUP",
	"TestQuitSendsPendingRepliesFirst",
	"TestPipelinedCommandsWithPrefetch", "TestPrefetchAroundWaitAndQuit",
	// WAITs parked and woken: granted, timed out, given up, unblocked.
	"TestWaitersServedInOrder", "TestWaitTimesOut", "TestWaiterThatHangsUpLeavesTheQueue",
	"TestWaiterGetsExpiredLease", "TestOwnerRetryOnANewConnection",
	"TestIdleClockRestartsAfterWait", "TestHangupNoticedPastIdleDeadline",
	"TestPipelinedWaiterHangupGetsNoLease", "TestFinishedWaitsLeaveTimerHeap",
	"TestIdleTimeoutClosesClientThatDoesNotRead",
	"TestClientUnblockEndsAWait", "TestClientUnblockRacesTheGrant",
	"TestGiveBackSparesTheOwnersRetry", "TestACLReload", "TestACLReloadClosesWaiter",
	"TestForceReleaseOverTheWire",
	"TestMAcquireWaitTakesKeysInOrder", "TestMAcquireTimeoutReleasesWhatItTook",
	"TestMAcquireHangUpReleasesWhatItTook", "TestMAcquireOwnerRetryTakesOver",
	"TestMAcquireEphemeral", "TestMAcquireManyClients",
	"TestMAcquireThatLostAKeyOnTheWayRepliesNil", "TestMaxLocksMAcquireWaitRefusedOnTheWay",
	"TestSharedWriterPreference", "TestSharedWriterNotStarved",
	"TestSharedReadersBehindAWriterThatGivesUp", "TestSharedPriorityReaderAheadOfAWriter",
	"TestSemaphoreWaiters", "TestSemaphoreNeverExceedsLimit",
	"TestLeaseExclusionRace",
	// Pub/sub delivery.
	"TestLockEventsOverPubSub", "TestRedisCliSubscribeSeesEvents",
	"TestNoMessageAfterUnsubscribeReply", "TestIdleTimeoutSparesSubscribers",
	"TestSubscribeMissesNoEventAfterItsConfirmation", "TestForceReleaseEvent",
	// Shutdown.
	"TestCloseAnswersParkedWaits", "TestCloseWaitsForTheFirstClose",
	"TestShutdownTimeoutBoundsClose",
	// TLS.
	"TestTLSCommands", "TestTLSAuthClients", "TestTLSVersions", "TestTLSOnly",
	"TestTLSSilentClient", "TestTLSBigPipeline", "TestTLSRotationUnderLoad",
	"TestRedisCliTLS", "TestTLSWaitAndEvents", "TestTLSCloseDuringHandshake",
	"TestTLSRefusalsAndAuth", "TestTLSCertificateUser",
	// Real clients: redis-cli's sessions and prompt, redis-benchmark's
	// pipelines.
	"TestRedisCliSessions", "TestRedisCliInteractive", "TestRedisBenchmark",
}

// transportTests is transportTestNames as a set.
var transportTests = func() map[string]bool {
	set := make(map[string]bool, len(transportTestNames))
	for _, n := range transportTestNames {
		set[n] = true
	}
	return set
}()

// skipUnlessTransportTest is testConfig's hook: in a transport pass, a
// test transportTestNames does not list skips.
func skipUnlessTransportTest(t testing.TB) {
	t.Helper()
	servertest.SkipUnlessTransportTest(t, transportTests)
}

// TestListedTransportTestsExist fails when transportTestNames names a test or
// fuzz target that no file of the package declares (whatever its build
// constraints), or names one twice.
func TestListedTransportTestsExist(t *testing.T) {
	_, files := testutil.ParseSources(t, true)
	declared := map[string]bool{}
	for _, file := range files {
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil {
				declared[fn.Name.Name] = true
			}
		}
	}
	var missing []string
	for _, name := range transportTestNames {
		if !declared[name] || !strings.HasPrefix(name, "Test") && !strings.HasPrefix(name, "Fuzz") {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		t.Errorf("transportTestNames lists tests no file of the package declares (renamed? removed?): %s", strings.Join(missing, ", "))
	}
	if len(transportTests) != len(transportTestNames) {
		t.Errorf("transportTestNames lists %d names, %d of them different: a name is there twice", len(transportTestNames), len(transportTests))
	}
}
