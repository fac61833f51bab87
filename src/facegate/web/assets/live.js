// The live view: the camera (getUserMedia) sent over WebRTC to POST /v1/streams with a
// saved face; the swapped stream shown beside it, with fps and latency from the stream's
// data channel (and GET /v1/streams/{id}); Stop ends it (DELETE). The server answers with
// all its ICE candidates in the SDP and takes none trickled, so the offer is sent once
// the browser has gathered its own. A stream whose server stops answering (its process
// died: no stats on the data channel for SILENT_MS, or the connection failed) is shown
// ended; the server side ends it as of its last heartbeat (docs/live.md). The ICE servers
// (STUN, and TURN with a credential of this tenant that expires) come from
// GET /v1/streams/ice before each offer; with TURN the browser gathers a relay candidate,
// which is what reaches a server whose own UDP ports are not reachable (a cluster).

import { api } from "./api.js";
import { $, h, showError } from "./dom.js";

let session = null;
const SILENT_MS = 5000; // the data channel's stats come every second

function gathered(pc) {
  if (pc.iceGatheringState === "complete") return Promise.resolve();
  return new Promise((resolve) => {
    const check = () => {
      if (pc.iceGatheringState === "complete") {
        pc.removeEventListener("icegatheringstatechange", check);
        resolve();
      }
    };
    pc.addEventListener("icegatheringstatechange", check);
    setTimeout(resolve, 3000); // what is gathered by then is enough on a local network
  });
}

function showStats(stats) {
  const latency = stats.latency_ms == null ? "–" : `${Math.round(stats.latency_ms)} ms`;
  $("#live-stats").textContent = `Streaming · ${stats.fps.toFixed(1)} fps · latency ${latency}`;
}

function setRunning(running) {
  $("#live-start").disabled = running;
  $("#live-stop").disabled = !running;
  $("#live-face").disabled = running;
}

function ended(reason, detail) {
  const text = detail ? `${reason}: ${detail}` : reason;
  teardown();
  $("#live-stats").textContent = `Stream ended (${text}).`;
}

function teardown() {
  if (!session) return;
  clearInterval(session.timer);
  session.pc.close();
  for (const track of session.camera.getTracks()) track.stop();
  $("#live-camera").srcObject = null;
  $("#live-swapped").srcObject = null;
  session = null;
  setRunning(false);
}

async function poll() {
  if (!session || !session.id) return;
  if (session.heard && Date.now() - session.heard > SILENT_MS) {
    ended("connection-lost", `no word from the server for ${SILENT_MS / 1000} s`);
    return;
  }
  const stream = await api(`/v1/streams/${session.id}`).catch(() => null);
  if (!stream || !session) return;
  if (stream.state === "ended") ended(stream.end_reason, stream.end_detail);
  else showStats(stream);
}

async function start() {
  showError($("#live-error"), "");
  const faceId = $("#live-face").value;
  if (!faceId) return;
  setRunning(true);
  $("#live-stats").textContent = "Starting…";
  try {
    const ice = await api("/v1/streams/ice");
    const camera = await navigator.mediaDevices.getUserMedia({
      video: { width: 640, height: 480 },
      audio: false,
    });
    const pc = new RTCPeerConnection({
      iceServers: ice.ice_servers,
      iceTransportPolicy: ice.relay_only ? "relay" : "all",
    });
    session = { pc, camera, id: null, heard: null, timer: setInterval(poll, 1000) };
    $("#live-camera").srcObject = camera;
    for (const track of camera.getTracks()) pc.addTrack(track, camera);
    const channel = pc.createDataChannel("facegate");
    channel.addEventListener("message", (event) => {
      const message = JSON.parse(event.data);
      if (session) session.heard = Date.now();
      if (message.event === "stats") showStats(message);
      else if (message.event === "ended") ended(message.reason, message.detail);
    });
    pc.addEventListener("connectionstatechange", () => {
      if (pc.connectionState === "failed" && session && session.pc === pc) {
        ended("connection-lost", "the connection to the server failed");
      }
    });
    pc.addEventListener("track", (event) => {
      if (event.track.kind === "video") {
        $("#live-swapped").srcObject = event.streams[0] || new MediaStream([event.track]);
      }
    });
    await pc.setLocalDescription(await pc.createOffer());
    await gathered(pc);
    const answer = await api("/v1/streams", {
      method: "POST",
      json: { sdp: pc.localDescription.sdp, source_face_id: faceId },
    });
    if (!session) return; // stopped meanwhile
    session.id = answer.id;
    await pc.setRemoteDescription({ type: "answer", sdp: answer.sdp });
    $("#live-stats").textContent = "Streaming…";
  } catch (error) {
    teardown();
    $("#live-stats").textContent = "Not streaming.";
    showError($("#live-error"), error.message || String(error));
  }
}

async function stop() {
  const id = session && session.id;
  teardown();
  $("#live-stats").textContent = "Stream ended.";
  if (id) await api(`/v1/streams/${id}`, { method: "DELETE" }).catch(() => null);
}

export function initLive() {
  $("#live-start").addEventListener("click", start);
  $("#live-stop").addEventListener("click", stop);
}

/** Leaving the view ends a running stream (the camera is not left on in the background). */
export function leaveLive() {
  if (session) stop();
}

export async function showLive() {
  const select = $("#live-face");
  const faces = await api("/v1/faces/library");
  select.replaceChildren(...faces.map((face) => h("option", { value: face.id }, face.name)));
  $("#live-none").hidden = faces.length > 0;
  $("#live-start").disabled = Boolean(session) || faces.length === 0;
}
