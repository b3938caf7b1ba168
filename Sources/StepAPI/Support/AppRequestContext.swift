import Hummingbird
import Logging
import NIOCore
import StepStore
import Synchronization

/// What a handler learned about a request that the logging middleware reports after it.
package final class RequestTrace: Sendable {
    package struct State: Sendable {
        package var walkerId: String?
        package var verdict: String?
        package var reasonCount: Int?
    }

    private let state = Mutex(State())

    package init() {}

    package var snapshot: State { state.withLock { $0 } }

    func update(_ body: (inout State) -> Void) {
        state.withLock { body(&$0) }
    }
}

package struct AppRequestContext: RequestContext, RemoteAddressRequestContext {
    package var coreContext: CoreRequestContextStorage
    package let trace: RequestTrace
    /// The peer of the connection; nil without a socket (router tests).
    package let remoteAddress: SocketAddress?

    package init(source: Source) {
        self.coreContext = .init(source: source)
        self.trace = RequestTrace()
        self.remoteAddress = source.channel.remoteAddress
    }
}
