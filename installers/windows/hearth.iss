; Hearth's Windows installer, for Inno Setup 6.3 or later: a per-user install that needs no
; administrator rights, a Start-menu entry, an optional desktop icon, and an uninstaller that keeps
; the user's conversations unless they ask for them to go.
;
; installers/windows/package_windows.py compiles it after installers/build_bundle.py, passing
;   /DAppVersion=<pyproject.toml's version>  /DArch=arm64|x64  /DBundleDir=<dist\Hearth>
; and, when a signing certificate is configured (installers/SIGNING.md), /DSign with the
; /Shearth=<signtool command> that signs the setup and its uninstaller.
; By hand, from the repository: iscc /DAppVersion=0.1.0 /DArch=x64 installers\windows\hearth.iss

#ifndef AppVersion
  #define AppVersion "0.0.0"
#endif
#ifndef Arch
  #define Arch "x64"
#endif
; The PyInstaller onedir folder: Hearth.exe, hearth-cli.exe, _internal\, icons\, THIRD_PARTY_LICENSES.
#ifndef BundleDir
  #define BundleDir "..\..\dist\Hearth"
#endif
; Where Hearth keeps conversations, settings, imported models and caches on Windows: platformdirs'
; user_data_dir("Hearth", appauthor=False), with its Cache subfolder (app/services/paths.py).
#define UserDataDir "{localappdata}\Hearth"

[Setup]
AppId={{6E0B3C52-8F1D-4A7E-9C35-2D4B7A91F0C8}
AppName=Hearth
AppVersion={#AppVersion}
AppVerName=Hearth {#AppVersion}
AppPublisher=Hearth
PrivilegesRequired=lowest
DefaultDirName={localappdata}\Programs\Hearth
DisableProgramGroupPage=yes
OutputDir=..\..\dist
OutputBaseFilename=Hearth-{#AppVersion}-windows-{#Arch}-setup
SetupIconFile={#BundleDir}\icons\hearth.ico
UninstallDisplayIcon={app}\Hearth.exe
UninstallDisplayName=Hearth
WizardStyle=modern
Compression=lzma2
SolidCompression=yes
#if Arch == "arm64"
ArchitecturesAllowed=arm64
ArchitecturesInstallIn64BitMode=arm64
#elif Arch == "x64"
; x64compatible: x64 Windows, and Arm64 Windows 11 through its x64 emulation.
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
#else
  #error Arch must be arm64 or x64
#endif
#ifdef LicenseFile
LicenseFile={#LicenseFile}
#endif
#ifdef Sign
SignTool=hearth
SignedUninstaller=yes
#endif

[Languages]
Name: "english"; MessagesFile: "compiler:Default.isl"

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked

[InstallDelete]
; An update replaces the bundle's libraries as a whole, so none of an older version's stays behind.
Type: filesandordirs; Name: "{app}\_internal"

[Files]
Source: "{#BundleDir}\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{autoprograms}\Hearth"; Filename: "{app}\Hearth.exe"; Comment: "A private, offline assistant"
Name: "{autodesktop}\Hearth"; Filename: "{app}\Hearth.exe"; Tasks: desktopicon

[Run]
Filename: "{app}\Hearth.exe"; Description: "{cm:LaunchProgram,Hearth}"; Flags: nowait postinstall skipifsilent

[Code]
function UserDataDir: String;
begin
  Result := ExpandConstant('{#UserDataDir}');
end;

{ The user's data outlives the app unless they say otherwise: a silent uninstall keeps it, and the
  question's default button is No. }
procedure CurUninstallStepChanged(CurUninstallStep: TUninstallStep);
begin
  if (CurUninstallStep = usPostUninstall) and (not UninstallSilent) and DirExists(UserDataDir) then
  begin
    if MsgBox('Also delete my conversations and models?' + #13#10#13#10 +
              'Hearth keeps your conversations, settings and imported models in' + #13#10 +
              UserDataDir + #13#10#13#10 +
              'Choose No to keep them for a later Hearth. Models downloaded into the Hugging Face ' +
              'cache, and a data folder you chose in the settings, are not touched either way.',
              mbConfirmation, MB_YESNO or MB_DEFBUTTON2) = IDYES then
      DelTree(UserDataDir, True, True, True);
  end;
end;
