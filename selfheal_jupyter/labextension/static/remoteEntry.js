/*
 * selfheal-jupyter's front-end part (JupyterLab 4 / Notebook 7), written by hand as a
 * module-federation container so that it needs no build step: `init` receives the
 * shared-module scope of the page, `get("./extension")` returns the plugin.
 *
 * The plugin registers the comm target "selfheal-jupyter" on the kernel of every
 * notebook. The kernel opens a comm when a cell run starts ({action: "hello"}) and
 * sends {action: "insert" | "replace", cell_id, code, request} when the user presses
 * Insert below / Replace this cell in the run's panel. The cell is found by its id
 * (the id JupyterLab sent with the execute request), so it does not matter which
 * cell is active. The plugin edits cell sources; a replace may also drop the cell's
 * error outputs (clear_errors: the traceback of the code just replaced) and, for
 * Accept and run, run that cell (run: true) — it runs nothing otherwise. When a
 * run ends, {action: "reveal"} scrolls its verdict and decision into view while the
 * user is still at that cell or the one below it.
 */
(function () {
  "use strict";
  var NAME = "selfheal-jupyter";
  var TARGET = "selfheal-jupyter";
  var shareScope = null;
  var notebookModule = null;

  function sharedModule(pkg) {
    var versions = shareScope && shareScope[pkg];
    if (!versions) {
      return Promise.reject(new Error(NAME + ": the page does not share " + pkg));
    }
    var keys = Object.keys(versions);
    var chosen = keys.filter(function (k) { return versions[k].loaded; })[0] || keys[0];
    return Promise.resolve(versions[chosen].get()).then(function (factory) { return factory(); });
  }

  // The cell's outputs of type "error" (the replaced code's traceback), the others kept.
  function clearErrors(cell) {
    var outputs = cell.model.outputs;
    if (!outputs) { return 0; }
    var removed = 0;
    for (var i = outputs.length - 1; i >= 0; i--) {
      if (outputs.get(i).type === "error") {
        var shared = cell.model.sharedModel;
        if (shared && typeof shared.updateOutputs === "function") {
          shared.updateOutputs(i, i + 1, []);
        } else {
          var kept = [];
          for (var k = 0; k < outputs.length; k++) { if (k !== i) { kept.push(outputs.get(k).toJSON()); } }
          outputs.clear();
          kept.forEach(function (o) { outputs.add(o); });
        }
        removed++;
      }
    }
    return removed;
  }

  // Run one cell of the notebook where it is, as Ctrl+Enter on it would.
  function runCell(panel, index) {
    var actions = notebookModule && notebookModule.NotebookActions;
    var notebook = panel.content;
    if (!actions) { return false; }
    if (typeof actions.runCells === "function") {
      actions.runCells(notebook, [notebook.widgets[index]], panel.sessionContext);
      return true;
    }
    notebook.activeCellIndex = index;
    notebook.deselectAll();
    actions.run(notebook, panel.sessionContext);
    return true;
  }

  function apply(panel, data) {
    var notebook = panel.content;
    var cells = notebook.widgets;
    var index = -1;
    for (var i = 0; i < cells.length; i++) {
      if (cells[i].model.id === data.cell_id) { index = i; break; }
    }
    if (index < 0) {
      return { ok: false, reason: "the cell is no longer in this notebook" };
    }
    if (data.action === "insert") {
      notebook.model.sharedModel.insertCell(index + 1, { cell_type: "code", source: data.code });
      return { ok: true, index: index + 1 };
    }
    if (data.action === "replace") {
      cells[index].model.sharedModel.setSource(data.code);
      var cleared = data.clear_errors ? clearErrors(cells[index]) : 0;
      var ran = data.run ? runCell(panel, index) : false;
      if (data.run && !ran) {
        return { ok: false, reason: "the cell was replaced but this front end could not run it" };
      }
      return { ok: true, index: index, cleared: cleared, ran: ran };
    }
    if (data.action === "reveal") {
      return reveal(notebook, cells[index], index);
    }
    return { ok: false, reason: "unknown action " + data.action };
  }

  // Bring the run's verdict and decision into view once they are drawn, unless the
  // user has moved on: only while the active cell is the run's cell or the one below.
  function reveal(notebook, cell, index) {
    var active = notebook.activeCellIndex;
    if (active !== index && active !== index + 1) {
      return { ok: true, moved: false };
    }
    var tries = 0;
    var look = function () {
      var decision = cell.node.querySelector(".selfheal-decision");
      if (!decision || decision.offsetHeight === 0) {
        if (++tries < 100) { setTimeout(look, 50); }
        return;
      }
      var verdicts = cell.node.querySelectorAll(".selfheal-summary");
      if (verdicts.length) { verdicts[verdicts.length - 1].scrollIntoView({ block: "nearest" }); }
      decision.scrollIntoView({ block: "nearest" });
    };
    look();
    return { ok: true, moved: true };
  }

  function answer(panel, comm, data) {
    if (!data || !data.action) { return; }
    var reply;
    if (data.action === "hello") {
      reply = { ok: true };
    } else {
      try {
        reply = apply(panel, data);
      } catch (err) {
        reply = { ok: false, reason: String(err) };
      }
    }
    reply.request = data.request;
    reply.action = data.action;
    comm.send(reply);
  }

  function hook(kernel, panel, hooked) {
    if (!kernel || hooked.has(kernel)) { return; }
    hooked.add(kernel);
    kernel.registerCommTarget(TARGET, function (comm, msg) {
      comm.onMsg = function (m) { answer(panel, comm, m.content.data); };
      answer(panel, comm, msg.content.data);
    });
  }

  function watch(panel, hooked) {
    var context = panel.sessionContext;
    var sync = function () {
      var session = context.session;
      hook(session ? session.kernel : null, panel, hooked);
    };
    context.kernelChanged.connect(sync);
    context.ready.then(sync);
    sync();
  }

  function plugin(tokens) {
    return {
      id: NAME + ":cells",
      description: "Insert below / replace a cell on request of the selfheal-jupyter kernel side.",
      autoStart: true,
      requires: [tokens.INotebookTracker],
      activate: function (app, tracker) {
        var hooked = new WeakSet();
        tracker.forEach(function (panel) { watch(panel, hooked); });
        tracker.widgetAdded.connect(function (_sender, panel) { watch(panel, hooked); });
      }
    };
  }

  window._JUPYTERLAB = window._JUPYTERLAB || {};
  window._JUPYTERLAB[NAME] = {
    init: function (scope) { shareScope = scope; },
    get: function (module) {
      if (module !== "./extension") {
        return Promise.reject(new Error(NAME + " has no module " + module));
      }
      return sharedModule("@jupyterlab/notebook").then(function (notebook) {
        notebookModule = notebook;
        var exports = { __esModule: true, default: plugin(notebook) };
        return function () { return exports; };
      });
    }
  };
})();
