// One spelling of a target, sent to the proxy by node's http client, in
// absolute form and as a CONNECT. argv: proxy port, the authority as hex
// bytes. Prints `client=outcome` pairs separated by " | ".
"use strict";
const http = require("http");

const port = Number(process.argv[2]);
const authority = Buffer.from(process.argv[3], "hex").toString("latin1");

function request(options, name) {
  return new Promise((resolve) => {
    const done = (v) => resolve(`${name}=${v}`);
    try {
      const req = http.request({ host: "127.0.0.1", port, timeout: 20000, ...options });
      req.on("response", (res) => {
        res.resume();
        done(res.statusCode);
      });
      req.on("connect", (res, socket) => {
        socket.destroy();
        done(res.statusCode);
      });
      req.on("timeout", () => req.destroy(new Error("timeout")));
      req.on("error", (e) => done(`client:${e.code || e.message}`));
      req.end();
    } catch (e) {
      done(`client:${e.code || e.message}`);
    }
  });
}

(async () => {
  const out = [];
  out.push(
    await request(
      { method: "GET", path: `http://${authority}/`, headers: { Host: authority } },
      "node-http",
    ),
  );
  out.push(await request({ method: "CONNECT", path: authority }, "node-connect"));
  console.log(out.join(" | "));
})();
