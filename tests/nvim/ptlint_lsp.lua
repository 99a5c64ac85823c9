-- Drive `ptlint server` from Neovim, headless: open a file, wait for the
-- diagnostics and print them, show the hover of the first one, then apply a
-- code action ("Suppress", then the fix) and print the buffer after each.
--
--   PTLINT_FILE=train.py PTLINT_CMD="ptlint server" \
--     nvim --headless -u NONE -c "luafile tests/nvim/ptlint_lsp.lua"
--
-- Works with Neovim 0.7 (vim.lsp.start_client) and 0.11+ (vim.lsp.config).
local file = assert(os.getenv("PTLINT_FILE"), "set PTLINT_FILE")
local cmd = vim.split(os.getenv("PTLINT_CMD") or "ptlint server", " ", { trimempty = true })

local function say(line) io.stdout:write(line .. "\n") end
local function finish(code) io.stdout:flush(); vim.cmd((code == 0 and "qa!") or "cq!") end

vim.cmd("edit " .. vim.fn.fnameescape(file))
local buf = vim.api.nvim_get_current_buf()
if vim.lsp.config then
  say("neovim: vim.lsp.config")
  vim.lsp.config("ptlint", {
    cmd = cmd, filetypes = { "python" }, root_markers = { "pyproject.toml", "ptlint.toml", ".git" },
  })
  vim.lsp.enable("ptlint")
  vim.bo[buf].filetype = "python" -- -u NONE: no filetype detection; this attaches the server
else
  say("neovim: vim.lsp.start_client")
  local id = vim.lsp.start_client({ name = "ptlint", cmd = cmd, root_dir = vim.fn.getcwd() })
  vim.lsp.buf_attach_client(buf, id)
end

-- the version of each publication, to wait for the one of the buffer's text
local published = nil
local publish = vim.lsp.handlers["textDocument/publishDiagnostics"]
vim.lsp.handlers["textDocument/publishDiagnostics"] = function(err, result, ctx, config)
  published = result.version
  return publish(err, result, ctx, config)
end

local function version()
  local versions = vim.lsp.util.buf_versions
  return versions and versions[buf] or vim.b[buf].changedtick
end

-- the diagnostics of the buffer's current text
local function diagnostics()
  vim.wait(120000, function() return published ~= nil and published == version() end, 50)
  local found = vim.diagnostic.get(buf)
  table.sort(found, function(a, b) return a.lnum < b.lnum end)
  return found
end

local function show(found)
  for _, d in ipairs(found) do
    say(string.format("  %d:%d %s %s %s", d.lnum + 1, d.col + 1, d.source, d.code, d.message))
  end
end

local function request(method, params)
  local replies = vim.lsp.buf_request_sync(buf, method, params, 120000) or {}
  for _, reply in pairs(replies) do
    if reply.err then say("error: " .. vim.inspect(reply.err)) else return reply.result end
  end
end

local function encoding()
  local clients = vim.lsp.get_clients and vim.lsp.get_clients({ bufnr = buf })
    or vim.lsp.get_active_clients()
  for _, client in pairs(clients) do return client.offset_encoding end
end

local found = diagnostics()
say("diagnostics:")
show(found)
if #found == 0 then finish(1) end
local first = found[1]
local uri = vim.uri_from_bufnr(buf)

local hover = request("textDocument/hover", {
  textDocument = { uri = uri }, position = { line = first.lnum, character = first.col } })
say("hover: " .. (hover and vim.split(hover.contents.value, "\n")[1] or "none"))

local function act(prefix)
  local line = vim.api.nvim_buf_get_lines(buf, first.lnum, first.lnum + 1, false)[1]
  local actions = request("textDocument/codeAction", {
    textDocument = { uri = uri },
    range = { start = { line = first.lnum, character = first.col },
              ["end"] = { line = first.lnum, character = #line } },
    context = { diagnostics = {} },
  }) or {}
  local titles = {}
  for _, a in ipairs(actions) do table.insert(titles, a.title) end
  say("code actions: " .. table.concat(titles, " | "))
  for _, action in ipairs(actions) do
    if action.title:sub(1, #prefix) == prefix then
      if not action.edit then action = request("codeAction/resolve", action) end
      vim.lsp.util.apply_workspace_edit(action.edit, encoding())
      say("applied: " .. action.title)
      for i, text in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
        say(string.format("  %3d  %s", i, text))
      end
      return true
    end
  end
  say("no action starting with " .. prefix)
  return false
end

if not act("Suppress " .. first.code) then finish(1) end
say("diagnostics after the suppression:")
show(diagnostics())
vim.cmd("silent undo")
say("diagnostics after undo:")
show(diagnostics())
if not act(first.code .. ": ") then finish(1) end
found = diagnostics()
say("diagnostics after the fix:")
show(found)
finish(0)
