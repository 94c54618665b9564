"""The self-contained HTML page: meshcat's viewer (three.js) inline, the scene, the
frames, and a small player (play/pause, time slider, speed, ``#t=SECONDS``).

The page loads nothing: meshcat's ``main.min.js`` bundle (three.js, its loaders and
orbit controls, dat.gui, msgpack) is copied into it, as meshcat's own static export
does; the scene is meshcat commands (msgpack, base64) and the frames are JSON.

What the page exposes for tests and scripts: ``window.kanedyn`` (``seek(t)``,
``play()``, ``pause()``, ``data``, ``viewer``) and, on ``<body>``,
``data-kanedyn-bodies`` (the number of body nodes in the scene graph, counted in the
page), ``data-kanedyn-time`` (the time shown) and ``data-kanedyn-ready``.
"""

from __future__ import annotations

import base64
import html
import json
from importlib import resources
from typing import Any

__all__ = ["FRAMES_ID", "SCENE_ID", "render", "viewer_bundle"]

FRAMES_ID = "kanedyn-frames"
SCENE_ID = "kanedyn-scene"


def viewer_bundle() -> str:
    """meshcat's viewer bundle (``meshcat/viewer/dist/main.min.js``), as text."""
    src = resources.files("meshcat") / "viewer" / "dist" / "main.min.js"
    return src.read_text(encoding="utf-8")


def _json_for_script(obj: Any) -> str:
    # '<' escaped so that no string in the data can close the <script> element
    return json.dumps(obj, separators=(",", ":")).replace("<", "\\u003c")


def pack_commands(commands: list[Any]) -> list[str]:
    """meshcat commands, msgpack-encoded by meshcat's own packer, as base64 strings."""
    import umsgpack

    return [base64.b64encode(umsgpack.packb(c.lower())).decode("ascii") for c in commands]


def render(title: str, data: dict[str, Any], commands: list[Any]) -> str:
    """The page's HTML text."""
    bundle = viewer_bundle().replace("</script", "<\\/script")
    return _TEMPLATE.format(
        title=html.escape(title),
        note=html.escape(data["note"]),
        bundle=bundle,
        frames_id=FRAMES_ID,
        scene_id=SCENE_ID,
        frames=_json_for_script(data),
        scene=_json_for_script(pack_commands(commands)),
        nb=len(data["bodies"]),
        player=_PLAYER,
    )


_PLAYER = r"""
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("kanedyn-frames").textContent);
  const scene = JSON.parse(document.getElementById("kanedyn-scene").textContent);
  const pane = document.getElementById("meshcat-pane");
  const viewer = new MeshCat.Viewer(pane);
  const bytes = (b64) => Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0));
  for (const cmd of scene) viewer.handle_command_bytearray(bytes(cmd));

  // one clip per body (position and quaternion tracks) and one for the H arrow
  const t0 = data.t[0];
  const T = data.t[data.t.length - 1] - t0;
  const times = data.t.map((t) => t - t0);
  const column = (rows, i) => rows.flatMap((row) => row[i]);
  const clip = (tracks) => ({name: "default", fps: 1, duration: T, tracks: tracks});
  const track = (name, type, values) => ({name: name, type: type, times: times, values: values});
  const animations = data.nodes.map((node, i) => ({
    path: ["kanedyn", "bodies", node],
    clip: clip([track(".position", "vector", column(data.p, i)),
                track(".quaternion", "quaternion", column(data.quaternion, i))]),
  }));
  animations.push({
    path: ["kanedyn", "H"],
    clip: clip([track(".position", "vector", data.c.flat()),
                track(".quaternion", "quaternion", data.H_quaternion.flat()),
                track(".scale", "vector", data.H_scale.flatMap((s) => [s, s, s]))]),
  });
  // the flexible bodies' drawn segments and nodes (body frames)
  for (const tr of data.tracks || []) {
    const tracks = [track(".position", "vector", tr.position.flat())];
    if (tr.quaternion) tracks.push(track(".quaternion", "quaternion", tr.quaternion.flat()));
    if (tr.scale) tracks.push(track(".scale", "vector", tr.scale.flat()));
    animations.push({path: tr.path, clip: clip(tracks)});
  }
  viewer.set_animation(animations, {play: false, repetitions: 1});
  const anim = viewer.animator;
  anim.play();   // activates the actions, then hold them: the page opens paused
  anim.pause();
  anim.mixer.timeScale = data.speed;

  // camera: looking at the run's mean mass centre from the chosen direction (N: z up)
  const toView = (v) => [v[0], v[2], -v[1]];
  const cam = data.camera;
  viewer.set_property(["Cameras", "default", "rotated", "<object>"], "position", toView(cam.position));
  viewer.set_property(["Cameras", "default", "rotated", "<object>"], "far", cam.far);
  viewer.set_property(["Cameras", "default", "rotated", "<object>"], "near", cam.near);
  const target = toView(cam.target);
  viewer.controls.target.set(target[0], target[1], target[2]);
  viewer.controls.update();

  const play = document.getElementById("kd-play");
  const slider = document.getElementById("kd-slider");
  const label = document.getElementById("kd-time");
  const speed = document.getElementById("kd-speed");
  slider.min = data.t[0];
  slider.max = data.t[data.t.length - 1];
  slider.step = "any";
  speed.value = data.speed;
  const digits = Math.max(0, 3 - Math.floor(Math.log10(Math.max(T, 1e-9))));
  let shown = t0;
  let running = false;  // playing, as the user asked (meshcat's animator stops at the end)

  function show(t) {
    shown = t;
    slider.value = t;
    label.textContent = "t = " + t.toFixed(Math.min(digits + 1, 6)) + " s";
    document.body.dataset.kanedynTime = String(t);
  }
  function seek(t) {
    running = false;
    // just inside the clip: at exactly its end three.js would wrap to the start
    const tc = Math.max(0, Math.min(T * (1 - 1e-9), t - t0));
    anim.pause();
    for (const a of anim.actions) { a.paused = false; a.time = tc; }
    anim.mixer.update(0);
    anim.display_progress(tc);
    viewer.set_dirty();
    show(Math.min(t0 + T, Math.max(t0, t)));
    play.textContent = "\u25B6 play";
  }
  function start() {
    if (shown >= t0 + T * (1 - 1e-6)) seek(t0);
    anim.play();
    running = true;
    play.textContent = "\u275A\u275A pause";
  }
  function stop() {
    anim.pause();
    running = false;
    play.textContent = "\u25B6 play";
  }
  play.addEventListener("click", () => (anim.playing ? stop() : start()));
  slider.addEventListener("input", () => seek(parseFloat(slider.value)));
  speed.addEventListener("change", () => {
    const s = parseFloat(speed.value);
    if (s > 0) anim.mixer.timeScale = s;
  });
  function fromHash() {
    const m = /(?:^#|&)t=([-+0-9.eE]+)/.exec(window.location.hash);
    seek(m ? parseFloat(m[1]) : t0);
  }
  window.addEventListener("hashchange", fromHash);
  (function tick() {
    if (anim.playing) show(t0 + anim.time);
    else if (running) { running = false; seek(t0 + T); }  // finished: hold the last frame
    requestAnimationFrame(tick);
  })();
  fromHash();
  const bodies = viewer.scene_tree.find(["kanedyn", "bodies"]).children;
  document.body.dataset.kanedynBodies = String(Object.keys(bodies).length);
  document.body.dataset.kanedynReady = "1";
  window.kanedyn = {viewer: viewer, data: data, seek: seek, play: start, pause: stop};
})();
"""

_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="kanedyn (meshcat viewer)">
<title>{title}</title>
<style>
  body {{ margin: 0; font: 13px/1.3 system-ui, sans-serif; overflow: hidden; }}
  #meshcat-pane {{ width: 100vw; height: 100vh; overflow: hidden; }}
  #kd-bar {{ position: absolute; left: 0; right: 0; bottom: 0; display: flex; gap: 10px;
            align-items: center; padding: 6px 10px; background: rgba(255,255,255,0.85); }}
  #kd-slider {{ flex: 1; min-width: 80px; }}
  #kd-time {{ font-variant-numeric: tabular-nums; min-width: 9em; white-space: nowrap; }}
  #kd-bar label {{ white-space: nowrap; }}
  #kd-speed {{ width: 6em; }}
  #kd-title {{ position: absolute; left: 10px; top: 8px; color: white;
              text-shadow: 0 0 3px black; pointer-events: none; }}
  #kd-note {{ font-size: 11px; }}
</style>
</head>
<body data-kanedyn-expected-bodies="{nb}">
<div id="meshcat-pane"></div>
<div id="kd-title"><b>{title}</b><br><span id="kd-legend">N axes and body axes: x red, y green, z blue; yellow arrow: angular momentum H about the mass centre</span><br><span id="kd-note">{note}</span></div>
<div id="kd-bar">
  <button id="kd-play" type="button">&#9654; play</button>
  <input id="kd-slider" type="range" aria-label="time">
  <span id="kd-time"></span>
  <label>speed <input id="kd-speed" type="number" min="0" step="any"> &times;</label>
</div>
<script type="application/json" id="{frames_id}">{frames}</script>
<script type="application/json" id="{scene_id}">{scene}</script>
<script>
{bundle}
</script>
<script>
{player}
</script>
</body>
</html>
"""
