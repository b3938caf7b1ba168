import Foundation

/// The signals a long-running `stepd` (`serve`, `worker`) must survive from its first instruction on, before the
/// services that handle them are up.
enum ProcessSignals {
    /// SIGHUP asks for a reload (the whitelist reloader traps it once it runs); until then, and in a process
    /// whose reloader has stopped, it must not end the process, which is its default. SIGPIPE is what a write
    /// to a pipe nobody reads any more raises (a log collector gone, a closed terminal pipe): the log writer
    /// handles the failed write, so the signal must not end the process either. `serve`'s sockets have NIO's
    /// protection; the worker and the log output have none of their own.
    static func ignoreUntilHandled() {
        _ = signal(SIGHUP, SIG_IGN)
        _ = signal(SIGPIPE, SIG_IGN)
    }
}
