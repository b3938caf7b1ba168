import Hummingbird
import HummingbirdCore
import HummingbirdTesting
import NIOPosix
import StepAPI
import Testing

/// `EventLoopAffineChannel` on a real HTTP server: a handler runs on one of the server's event loops with it, and on
/// Swift's shared pool without it (the control, so the check can fail).
@Suite("Requests handled on their connection's event loop")
struct EventLoopAffinityTests {
    static func application(affine: Bool, loops: EventLoopExecutors) -> some ApplicationProtocol {
        let router = Router()
        router.get("/where") { _, _ -> String in
            guard let loop = MultiThreadedEventLoopGroup.currentEventLoop else { return "pool" }
            return loops.executor(for: loop) == nil ? "another loop" : "server loop"
        }
        return Application(
            router: router,
            server: HTTPServerBuilder { responder in
                let channel = HTTP1Channel(responder: responder)
                guard affine else { return channel }
                return EventLoopAffineChannel(channel, executors: loops)
            },
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            eventLoopGroupProvider: .shared(loops.group))
    }

    @Test("with the channel a handler runs on a loop of the server's group, without it on Swift's pool")
    func affinity() async throws {
        let loops = EventLoopExecutors(group: .singleton)
        for (affine, expected) in [(true, "server loop"), (false, "pool")] {
            try await Self.application(affine: affine, loops: loops).test(.live) { client in
                for _ in 0..<4 {
                    let response = try await client.execute(uri: "/where", method: .get)
                    #expect(response.status == .ok)
                    #expect(String(buffer: response.body) == expected, "affine: \(affine)")
                }
            }
        }
    }
}
