import Foundation
import Hummingbird
import Logging
import NIOCore

/// The JSON-echo baseline: the same HTTP server stack as stepd and the JSON work of an ingest (collect the body,
/// decode it, encode a response of the same shape), without authentication, storage, rate limits or request logs.
/// What an ingest costs beyond this is what StepLedger itself adds.
enum EchoApplication {
    /// The real server's default `http.maxBodyBytes`.
    static let maxBodyBytes = 16 * 1024

    static func build(host: String, port: Int, logger: Logger) -> some ApplicationProtocol {
        let router = Router()
        router.get("/livez") { _, _ in "ok" }
        router.post("/step/ingest") { request, _ -> Response in
            let body = try await request.body.collect(upTo: maxBodyBytes)
            let decoded: EchoIngestRequest
            do {
                decoded = try JSONDecoder().decode(EchoIngestRequest.self, from: Data(body.readableBytesView))
            } catch {
                throw HTTPError(.badRequest, message: "The body is not an ingest request.")
            }
            // A new encoder per response, configured as the real server's (JSONCoding).
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            let encoded = try encoder.encode(EchoIngestResponse(echoing: decoded))
            return Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: encoded)))
        }
        return Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "stepbench-echo"),
            logger: logger)
    }
}
